package kafka_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/kafka"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/kafkatest"
)

// committedOf returns the group's committed offset of tpc's partition
// (-1 for none).
func (e *env) committedOf(t testing.TB, tpc string, partition int32) int64 {
	t.Helper()
	os, err := e.adm.FetchOffsets(testCtx(t), group)
	if err != nil {
		return -1
	}
	o, ok := os.Lookup(tpc, partition)
	if !ok || o.Err != nil {
		return -1
	}
	return o.At
}

// A key made of the record's partition and offset (the docs' recipe for
// records without a producer's key) names the first record on its retry
// copy too: the copy at offset 0 of the retry topic must not take the
// key of the record at offset 0 of the first topic, replay that other
// record's result and be committed without ever running.
func TestRetryCopyKeyedByPartitionAndOffset(t *testing.T) {
	e := newEnv(t, 1)
	f := newEffects()
	e.start(t, kafka.Options{RetryTopic: retry, InPlaceAttempts: 1,
		Key: func(r *kgo.Record) string { return fmt.Sprintf("%d/%d", r.Partition, r.Offset) },
		Handler: func(ctx context.Context, r *kafka.Record) error {
			if n := f.add(string(r.Value)); string(r.Value) == "value of flaky" && n == 1 {
				return errors.New("the service is down")
			}
			return nil
		}})
	e.produce(t, 0, "first", 1) // offset 0: done, its result stored under 0/0
	e.produce(t, 0, "flaky", 1) // offset 1: fails once, copied to the retry topic's offset 0
	e.allCommitted(t, 1)
	idemtest.Eventually(t, "the retry copy committed", func() bool { return e.committedOf(t, retry, 0) == 1 })
	if n := f.get("value of flaky"); n != 2 {
		t.Errorf("flaky ran %d times, want 2: its retry copy replayed another record's result", n)
	}
	if n := f.get("value of first"); n != 1 {
		t.Errorf("first ran %d times, want 1", n)
	}
}

// A periodic commit that fails because Run is stopping (its context
// ended with the commit in flight) leaves its offsets to the commit Run
// makes as it stops: they are the member's still, and their results are
// stored.
func TestStopCommitsWhatAnInterruptedCommitHeld(t *testing.T) {
	e := newEnv(t, 1)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	held := make(chan struct{})
	var heldOnce sync.Once
	isTopic := e.isTopic(topic)
	e.kc.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.OffsetCommitRequest)
		if !slices.ContainsFunc(r.Topics, isTopic) {
			return nil, nil, false // kept for the next request
		}
		// The member's first commit of the topic: hold it until Run's
		// context ends, then drop it and its connection.
		heldOnce.Do(func() { close(held) })
		e.kc.SleepControl(func() {
			<-ctx.Done()
			time.Sleep(100 * time.Millisecond)
		})
		return nil, errors.New("the commit is lost"), true
	})
	c, err := kafka.New(kafka.Options{Consumer: e.consumer(t, 5*time.Second), Group: group, Topics: []string{topic},
		CommitInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		Handler: func(context.Context, *kafka.Record) error { return nil }}, kafkatest.GroupOpts(e.kc.Addrs)...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	e.produce(t, 0, "a", 1)
	idemtest.Recv(t, held)
	stop()
	if err := idemtest.Recv(t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if o := e.committed(t, 0); o != 1 {
		t.Errorf("committed %d once Run returned, want 1: the interrupted commit's offset was dropped", o)
	}
}

// A permanent error with a long message (a response body, say) does not
// make its record's dead-letter copy too large to produce, which would
// hold the record, and its partition, for ever: the Idem-Error header
// carries the start of the message.
func TestDeadLetterCopyOfALongError(t *testing.T) {
	e := newEnv(t, 1)
	long := strings.Repeat("x", 2<<20) // over the producer's 1 MB batch limit
	e.start(t, kafka.Options{DeadLetterTopic: dlt, Handler: func(ctx context.Context, r *kafka.Record) error {
		if r.Key == "bad" {
			return idem.Permanent(errors.New("card declined: " + long))
		}
		return nil
	}})
	e.produce(t, 0, "bad", 1)
	e.produce(t, 0, "good", 1)
	e.allCommitted(t, 1)
	recs := e.read(t, dlt, 1)
	for _, h := range recs[0].Headers {
		if h.Key == kafka.ErrorHeader && (!strings.HasPrefix(string(h.Value), "card declined: xxx") || len(h.Value) > kafka.MaxErrorHeader+3) {
			t.Errorf("Idem-Error header of %d bytes starting %.20q", len(h.Value), h.Value)
		}
	}
}

// A member whose group session is lost (its heartbeat answered
// UNKNOWN_MEMBER_ID) while a record of its partition is retried in place,
// the partition paused, drops what it had not committed, rejoins, and
// consumes the partition again from its committed offset: nothing is
// lost, the paused partition is fetched again, every record has one
// effect.
func TestLostSessionWhileRetrying(t *testing.T) {
	e := newEnv(t, 1)
	f := newEffects()
	var healed, armed atomic.Bool
	e.kc.ControlKey(int16(kmsg.Heartbeat), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if !armed.Load() {
			return nil, nil, false
		}
		armed.Store(false)
		resp := req.ResponseKind().(*kmsg.HeartbeatResponse)
		resp.ErrorCode = 25 // UNKNOWN_MEMBER_ID: the session is lost
		return resp, nil, true
	})
	lost := make(lostHook, 1)
	c, err := kafka.New(kafka.Options{Consumer: e.consumer(t, 5*time.Second), Group: group, Topics: []string{topic},
		CommitInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		Handler: func(ctx context.Context, r *kafka.Record) error {
			n := f.add(r.Key)
			if r.Key == "flaky" && !healed.Load() {
				return fmt.Errorf("the service is down (try %d)", n)
			}
			return nil
		}}, append(kafkatest.GroupOpts(e.kc.Addrs), kgo.WithHooks(lost))...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	defer func() {
		c.Close()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	e.produce(t, 0, "a", 1)
	e.produce(t, 0, "flaky", 1)
	e.produce(t, 0, "b", 1)
	idemtest.Eventually(t, "flaky retried in place", func() bool { return f.get("flaky") >= 2 })
	armed.Store(true)
	idemtest.Recv(t, lost)
	healed.Store(true)
	e.allCommitted(t, 1)
	if n := f.get("a"); n != 1 {
		t.Errorf("a ran %d times, want 1", n)
	}
	if n := f.get("b"); n != 1 {
		t.Errorf("b ran %d times, want 1", n)
	}
}

// lostHook receives the group management errors of a kgo client (after
// OnPartitionsLost ran).
type lostHook chan error

func (h lostHook) OnGroupManageError(err error) {
	select {
	case h <- err:
	default:
	}
}

// Run stops promptly while a dead-letter copy is in flight to a broker
// that does not answer: the record stays uncommitted (its next delivery
// replays the error and copies it again), and neither Run's end nor a
// revocation waits for the produce (franz-go's idempotent producer
// cannot fail a record whose request was sent, whatever its context).
func TestStopDoesNotWaitForADeadLetterCopy(t *testing.T) {
	e := newEnv(t, 1)
	info := e.kc.TopicInfo(dlt)
	release := make(chan struct{})
	var releaseOnce sync.Once
	unblock := func() { releaseOnce.Do(func() { close(release) }) }
	defer unblock()
	held := make(chan struct{})
	var heldOnce sync.Once
	e.kc.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.ProduceRequest)
		if !slices.ContainsFunc(r.Topics, func(tt kmsg.ProduceRequestTopic) bool {
			return tt.Topic == dlt || tt.TopicID == info.TopicID
		}) {
			return nil, nil, false
		}
		heldOnce.Do(func() { close(held) })
		e.kc.SleepControl(func() { <-release })
		return nil, nil, false // then handled as usual
	})
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	c, err := kafka.New(kafka.Options{Consumer: e.consumer(t, 5*time.Second), Group: group, Topics: []string{topic},
		DeadLetterTopic: dlt, CommitInterval: 20 * time.Millisecond, Logger: slog.New(slog.DiscardHandler),
		Handler: func(context.Context, *kafka.Record) error { return idem.Permanent(errors.New("card declined")) },
	}, kafkatest.GroupOpts(e.kc.Addrs)...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	e.produce(t, 0, "bad", 1)
	idemtest.Recv(t, held)
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Run: %v", err)
		}
	case <-time.After(5 * time.Second):
		unblock()
		<-done
		t.Fatal("Run did not return within 5s of its context's end: it waited for the dead-letter copy")
	}
	if o := e.committed(t, 0); o > 0 {
		t.Errorf("committed %d with the dead-letter copy unacknowledged", o)
	}
}

// A periodic commit that fails while a revocation waits for it leaves
// the revoked partition's offsets to the revocation's own commit: they
// were marked before the partition was fenced, their results are stored,
// and the partition is still this member's until the callback returns.
// Here the periodic commit is made to wait in the join (franz-go holds
// commits during join and sync) with both partitions' offsets, goes out
// once the new assignment is in, and is refused while the first member's
// revocation of the partition it lost waits for it.
func TestRevocationCommitsWhatAFailedCommitHeld(t *testing.T) {
	e := newEnv(t, 2)
	isTopic := e.isTopic(topic)
	var (
		mu        sync.Mutex
		memberA   string
		genA      int32
		holdJoin  bool
		refused   bool
		joinHeld  = make(chan struct{})
		joinGo    = make(chan struct{})
		refusedAt = map[int32]int64{}
	)
	e.kc.ControlKey(int16(kmsg.JoinGroup), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.JoinGroupRequest)
		mu.Lock()
		hold := holdJoin && r.MemberID == memberA && memberA != ""
		if hold {
			holdJoin = false
		}
		mu.Unlock()
		if hold {
			close(joinHeld)
			e.kc.SleepControl(func() { <-joinGo })
		}
		return nil, nil, false
	})
	e.kc.ControlKey(int16(kmsg.OffsetCommit), func(req kmsg.Request) (kmsg.Response, error, bool) {
		r := req.(*kmsg.OffsetCommitRequest)
		mu.Lock()
		defer mu.Unlock()
		if refused || memberA == "" || r.MemberID != memberA || r.Generation <= genA {
			return nil, nil, false
		}
		n := 0
		for _, tt := range r.Topics {
			if isTopic(tt) {
				n += len(tt.Partitions)
			}
		}
		if n < 2 {
			return nil, nil, false // the revocation's own commit: one partition
		}
		// The periodic commit of both partitions, in the new generation.
		refused = true
		resp := r.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, tt := range r.Topics {
			rt := kmsg.NewOffsetCommitResponseTopic()
			rt.Topic, rt.TopicID = tt.Topic, tt.TopicID
			for _, p := range tt.Partitions {
				if isTopic(tt) {
					refusedAt[p.Partition] = p.Offset
				}
				rp := kmsg.NewOffsetCommitResponseTopicPartition()
				rp.Partition, rp.ErrorCode = p.Partition, -1 // UNKNOWN_SERVER_ERROR
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		mu.Unlock()
		e.kc.SleepControl(func() { time.Sleep(300 * time.Millisecond) }) // the revocation waits meanwhile
		mu.Lock()
		return resp, nil, true
	})
	acked := make(chan string, 10)
	a := e.start(t, kafka.Options{CommitInterval: 100 * time.Millisecond,
		Handler: func(context.Context, *kafka.Record) error { return nil },
		OnVerdict: func(r *kafka.Record, v consume.Verdict) {
			if v.Decision == consume.Ack {
				acked <- r.Key
			}
		}})
	e.produce(t, 0, "pre-0", 1)
	e.produce(t, 1, "pre-1", 1)
	idemtest.Recv(t, acked)
	idemtest.Recv(t, acked)
	e.allCommitted(t, 2)
	mu.Lock()
	memberA, genA = a.Client().GroupMetadata()
	holdJoin = true
	mu.Unlock()

	var again []string // records of the first member's the second one fetched again
	e.start(t, kafka.Options{Handler: func(context.Context, *kafka.Record) error { return nil },
		OnVerdict: func(r *kafka.Record, v consume.Verdict) {
			mu.Lock()
			defer mu.Unlock()
			if v.Replayed() {
				again = append(again, r.Key)
			}
		}})
	idemtest.Recv(t, joinHeld)
	// The first member handles these during its join; its commit loop
	// takes their offsets and waits for the join to end.
	// The first member handles these during its join, both in one fetch;
	// its commit loop takes their offsets together and waits for the
	// join to end.
	var mid []*kgo.Record
	for p := range int32(2) {
		mid = append(mid, &kgo.Record{Topic: topic, Partition: p, Value: []byte("mid"),
			Headers: []kgo.RecordHeader{{Key: kafka.DefaultKeyHeader, Value: fmt.Appendf(nil, "mid-%d", p)}}})
	}
	if err := e.prod.ProduceSync(testCtx(t), mid...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	idemtest.Recv(t, acked)
	idemtest.Recv(t, acked)
	time.Sleep(250 * time.Millisecond) // two commit-loop ticks: nothing to observe them by
	close(joinGo)
	e.allCommitted(t, 2)
	idemtest.Eventually(t, "both members in the group", func() bool {
		return e.assignedTo(t, 0) != "" && e.assignedTo(t, 1) != "" && e.assignedTo(t, 0) != e.assignedTo(t, 1)
	})
	mu.Lock()
	defer mu.Unlock()
	// On a loaded machine the commit loop may miss the join; then no
	// commit was refused, and the check below holds as for any rebalance
	// (the test never skips: make test runs every consumer test).
	if refused {
		t.Logf("refused commit: %v", refusedAt)
	} else {
		t.Log("the commit loop did not take both partitions' offsets during the join: no commit was refused this run")
	}
	if len(again) > 0 {
		t.Errorf("the second member fetched %v again: the first member's revocation did not commit them", again)
	}
}

// A record whose result is stored as Run stops is committed by Run's
// final commit: the partition is still this member's, so stopping its
// goroutine does not fence what it finished.
func TestStopCommitsTheLastRecordDone(t *testing.T) {
	e := newEnv(t, 1)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	c, err := kafka.New(kafka.Options{Consumer: e.consumer(t, 5*time.Second), Group: group, Topics: []string{topic},
		CommitInterval: time.Hour, Logger: slog.New(slog.DiscardHandler),
		Handler: func(context.Context, *kafka.Record) error { return nil },
		OnVerdict: func(r *kafka.Record, v consume.Verdict) {
			if v.Decision == consume.Ack {
				// Done, not yet marked: Run stops now. Nothing tells when
				// Run has stopped the partition's goroutine; a short wait
				// makes it likely (a shorter one only hides the bug).
				stop()
				time.Sleep(200 * time.Millisecond)
			}
		}}, kafkatest.GroupOpts(e.kc.Addrs)...)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	e.produce(t, 0, "last", 1)
	if err := idemtest.Recv(t, done); err != nil {
		t.Fatalf("Run: %v", err)
	}
	if o := e.committed(t, 0); o != 1 {
		t.Errorf("committed %d once Run returned, want 1: the last record done was not committed", o)
	}
}

// A scope too long for any key (a long group name, or a Scope function's
// answer) would give every record up unrun (with no dead-letter topic:
// skipped and committed): New refuses it.
func TestNewRefusesAScopeThatCannotKey(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	cc, err := consume.New(consume.Options{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	h := func(context.Context, *kafka.Record) error { return nil }
	for name, o := range map[string]kafka.Options{
		"long group": {Consumer: cc, Group: strings.Repeat("g", 2000), Topics: []string{"t"}, Handler: h},
		"long scope": {Consumer: cc, Group: "g", Topics: []string{"t"}, Handler: h,
			Scope: func(topic, group string) string { return strings.Repeat(topic, 2000) }},
		"NUL in scope": {Consumer: cc, Group: "g\x00", Topics: []string{"t"}, Handler: h},
	} {
		c, err := kafka.New(o, kgo.SeedBrokers("127.0.0.1:1"))
		if c != nil {
			c.Close()
		}
		if c != nil || !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("%s: %v; want an invalid-argument error", name, err)
		}
	}
}

// runMember builds a member with opts (as env.start fills them) and the
// extra client options, and runs it until the end of the test.
func (e *env) runMember(t *testing.T, opts kafka.Options, extra ...kgo.Opt) *kafka.Consumer {
	t.Helper()
	if opts.Consumer == nil {
		opts.Consumer = e.consumer(t, 5*time.Second)
	}
	opts.Group, opts.Topics = group, []string{topic}
	if opts.CommitInterval == 0 {
		opts.CommitInterval = 50 * time.Millisecond
	}
	opts.Logger = slog.New(slog.DiscardHandler)
	c, err := kafka.New(opts, append(kafkatest.GroupOpts(e.kc.Addrs), extra...)...)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- c.Run(context.Background()) }()
	t.Cleanup(func() {
		c.Close()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	return c
}

// With the eager protocol every partition is revoked at each rebalance
// and most come back to the same member in a new generation: a record
// retried in place (its partition paused) when that happens is fetched
// again from the committed offset and goes on, the partition fetched
// again, the records before it not run again, and nothing is lost.
func TestEagerRebalanceWhileRetrying(t *testing.T) {
	e := newEnv(t, 4)
	f := newEffects()
	var healed atomic.Bool
	h := func(ctx context.Context, r *kafka.Record) error {
		n := f.add(r.Key)
		if r.Key == "flaky" && !healed.Load() {
			return fmt.Errorf("the service is down (try %d)", n)
		}
		return nil
	}
	eager := kgo.Balancers(kgo.RangeBalancer())
	e.runMember(t, kafka.Options{Handler: h}, eager)
	for p := range int32(4) {
		e.produce(t, p, fmt.Sprint("before-", p), 1)
	}
	e.produce(t, 0, "flaky", 1)
	for p := range int32(4) {
		e.produce(t, p, fmt.Sprint("after-", p), 1)
	}
	idemtest.Eventually(t, "flaky retried in place", func() bool { return f.get("flaky") >= 2 })
	e.runMember(t, kafka.Options{Handler: h}, eager)
	idemtest.Eventually(t, "both members assigned", func() bool {
		a, b := e.assignedTo(t, 0), e.assignedTo(t, 3)
		return a != "" && b != "" && a != b
	})
	healed.Store(true)
	e.allCommitted(t, 4)
	for p := range int32(4) {
		for _, k := range []string{fmt.Sprint("before-", p), fmt.Sprint("after-", p)} {
			if n := f.get(k); n != 1 {
				t.Errorf("%s ran %d times, want 1", k, n)
			}
		}
	}
}
