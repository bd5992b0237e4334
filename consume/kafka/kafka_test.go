package kafka_test

import (
	"context"
	"errors"
	"fmt"
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
)

// Records produced twice, to the same partition and to another one, run
// once each; every offset is committed.
func TestDuplicatesRunOnce(t *testing.T) {
	e := newEnv(t, 3)
	f := newEffects()
	e.start(t, kafka.Options{Handler: func(ctx context.Context, r *kafka.Record) error {
		f.add(r.Key)
		return nil
	}})
	ids := keys("order", 30)
	for i, id := range ids {
		e.produce(t, int32(i%3), id, 2)     // a producer's retry
		e.produce(t, int32((i+1)%3), id, 1) // and a copy elsewhere
	}
	e.allCommitted(t, 3)
	for _, id := range ids {
		if n := f.get(id); n != 1 {
			t.Errorf("%s ran %d times, want 1", id, n)
		}
	}
}

// No offset is committed before the record's result is stored: each
// OffsetCommit the cluster receives is checked against the store.
func TestCommitsOnlyAfterStore(t *testing.T) {
	e := newEnv(t, 2)
	var (
		mu     sync.Mutex
		byOff  = map[[2]int64]string{} // partition, offset -> idem key
		errs   []string
		gate   = make(chan struct{})
		inside = make(chan struct{}, 1)
	)
	cs := e.watchCommits(func(c commit) {
		mu.Lock()
		defer mu.Unlock()
		for off := range c.offset {
			k, ok := byOff[[2]int64{int64(c.partition), off}]
			if !ok {
				errs = append(errs, "commit past a record never handled")
				continue
			}
			st, err := e.rt.State(context.Background(), k)
			if err != nil || st.Status != idem.KeyCompleted {
				errs = append(errs, "commit of "+k+" before its result is stored: "+st.Status.String())
			}
		}
	})
	e.start(t, kafka.Options{
		Handler: func(ctx context.Context, r *kafka.Record) error {
			if r.Key == "slow" {
				inside <- struct{}{}
				<-gate
			}
			return nil
		},
		OnVerdict: func(r *kafka.Record, v consume.Verdict) {
			mu.Lock()
			byOff[[2]int64{int64(r.Partition), r.Offset}] = v.Key
			mu.Unlock()
		},
	})
	e.produce(t, 0, "a", 1)
	e.produce(t, 0, "slow", 1)
	e.produce(t, 0, "b", 1)
	idemtest.Recv(t, inside)
	idemtest.Eventually(t, "the record before the slow one committed", func() bool { return e.committed(t, 0) == 1 })
	// While the slow record runs, the other partition's records are
	// committed one by one; the slow one's partition stays at 1.
	for i := range 3 {
		e.produce(t, 1, fmt.Sprint("other-", i), 1)
		idemtest.Eventually(t, "the other partition's record committed", func() bool {
			return e.committed(t, 1) == int64(i+1)
		})
		if o := e.committed(t, 0); o != 1 {
			t.Fatalf("committed %d while the record at 1 runs", o)
		}
	}
	close(gate)
	e.allCommitted(t, 2)
	if len(cs.all()) == 0 {
		t.Fatal("no OffsetCommit of the topic seen: nothing was checked")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(errs) > 0 {
		t.Fatal(strings.Join(errs, "\n"))
	}
}

// A transient error is retried in place, with the records behind it
// waiting: the order within the partition is kept.
func TestTransientErrorRetriesInPlace(t *testing.T) {
	e := newEnv(t, 1)
	var (
		mu    sync.Mutex
		order []string
	)
	f := newEffects()
	var (
		member      atomic.Pointer[kafka.Consumer]
		pausedAtTry atomic.Bool // the partition paused when the record is tried again
	)
	member.Store(e.start(t, kafka.Options{Handler: func(ctx context.Context, r *kafka.Record) error {
		n := f.add(r.Key)
		if r.Key == "flaky" && n == 2 {
			paused := member.Load().Client().PauseFetchPartitions(nil)
			pausedAtTry.Store(slices.Contains(paused[topic], 0))
		}
		if r.Key == "flaky" && n < 3 {
			return errors.New("the service is down")
		}
		mu.Lock()
		order = append(order, r.Key)
		mu.Unlock()
		return nil
	}}))
	for _, k := range []string{"a", "flaky", "b", "c"} {
		e.produce(t, 0, k, 1)
	}
	e.allCommitted(t, 1)
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"a", "flaky", "b", "c"}; !slices.Equal(order, want) {
		t.Errorf("done in order %v, want %v", order, want)
	}
	if n := f.get("flaky"); n != 3 {
		t.Errorf("flaky ran %d times, want 3", n)
	}
	if !pausedAtTry.Load() {
		t.Error("the partition was not paused while its record was retried in place")
	}
}

// With a retry topic, a record whose attempts in place are spent goes
// there and its partition moves on; its retry runs in the first topic's
// scope, so a success there is the record's one effect.
func TestRetryTopic(t *testing.T) {
	e := newEnv(t, 1)
	f := newEffects()
	done := make(chan string, 10)
	e.start(t, kafka.Options{RetryTopic: retry, InPlaceAttempts: 2,
		Handler: func(ctx context.Context, r *kafka.Record) error {
			// flaky fails wherever it runs in place: only its copy on the
			// retry topic can succeed. (Failing its first two runs only
			// made the test depend on the group not rebalancing: a
			// rebalance delivers the record again, and its count of
			// attempts in place starts again.)
			if f.add(r.Key); r.Key == "flaky" && r.Topic == topic {
				return errors.New("the service is down")
			}
			done <- r.Topic + ":" + r.Key
			return nil
		}})
	e.produce(t, 0, "flaky", 1)
	e.produce(t, 0, "b", 1)
	got := []string{idemtest.Recv(t, done), idemtest.Recv(t, done)}
	slices.Sort(got)
	if want := []string{"orders-retry:flaky", "orders:b"}; !slices.Equal(got, want) {
		t.Fatalf("done: %v, want %v", got, want)
	}
	e.allCommitted(t, 1)
	// Two runs in place, then one from the retry topic; more in place only
	// if the group rebalanced meanwhile (a delivery cut short by a
	// rebalance is followed by one with its own two).
	if n := f.get("flaky"); n < 3 {
		t.Errorf("flaky ran %d times, want 2 in place and 1 from the retry topic", n)
	}
}

// A permanent error sends a copy to the dead-letter topic, then commits;
// the record's duplicate replays the error and goes there too, without
// running the handler.
func TestPermanentErrorGoesToDeadLetterTopic(t *testing.T) {
	e := newEnv(t, 1)
	f := newEffects()
	e.start(t, kafka.Options{DeadLetterTopic: dlt, Handler: func(ctx context.Context, r *kafka.Record) error {
		f.add(r.Key)
		if r.Key == "bad" {
			return idem.Permanent(errors.New("card declined"))
		}
		return nil
	}})
	e.produce(t, 0, "bad", 2)
	e.produce(t, 0, "good", 1)
	// A record without a key never runs, and is dead-lettered too.
	if err := e.prod.ProduceSync(testCtx(t), &kgo.Record{Topic: topic, Value: []byte("no key")}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.allCommitted(t, 1)
	if n := f.get("bad"); n != 1 {
		t.Errorf("bad ran %d times, want 1", n)
	}
	if n := f.get(""); n != 0 {
		t.Errorf("the record without a key ran %d times", n)
	}
	recs := e.read(t, dlt, 3)
	if string(recs[2].Value) != "no key" {
		t.Errorf("third dead letter %q, want the record without a key", recs[2].Value)
	}
	for _, r := range recs[:2] {
		h := map[string]string{}
		for _, x := range r.Headers {
			h[x.Key] = string(x.Value)
		}
		if h[kafka.DefaultKeyHeader] != "bad" || h[kafka.TopicHeader] != topic || h[kafka.PartitionHeader] != "0" ||
			!strings.Contains(h[kafka.ErrorHeader], "card declined") || string(r.Value) != "value of bad" {
			t.Errorf("dead letter %q with headers %v", r.Value, h)
		}
	}
}

// A dead-letter copy that cannot be produced keeps the record
// uncommitted, and the records behind it wait, until it can.
func TestFailedDeadLetterDoesNotCommit(t *testing.T) {
	e := newEnv(t, 1)
	var (
		mu      sync.Mutex
		refuse  = true
		refused int
	)
	// The test's records first: every produce after them is the
	// consumer's dead-letter copy.
	e.produce(t, 0, "bad", 1)
	e.produce(t, 0, "good", 1)
	e.kc.ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		e.kc.KeepControl()
		mu.Lock()
		defer mu.Unlock()
		r, ok := refuseProduce(req, refuse)
		if ok {
			refused++
		}
		return r, nil, ok
	})
	e.start(t, kafka.Options{DeadLetterTopic: dlt, Handler: func(ctx context.Context, r *kafka.Record) error {
		if r.Key == "bad" {
			return idem.Permanent(errors.New("card declined"))
		}
		return nil
	}})
	idemtest.Eventually(t, "two dead-letter copies refused", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return refused >= 2
	})
	if o := e.committed(t, 0); o > 0 {
		t.Fatalf("committed %d while the dead letter is refused", o)
	}
	mu.Lock()
	refuse = false
	mu.Unlock()
	e.allCommitted(t, 1)
	if recs := e.read(t, dlt, 1); string(recs[0].Value) != "value of bad" {
		t.Errorf("dead letter %q", recs[0].Value)
	}
}

// read reads n records of tpc from its start.
func (e *env) read(t *testing.T, tpc string, n int) []*kgo.Record {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.kc.Addrs...), kgo.ConsumeTopics(tpc),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var out []*kgo.Record
	ctx := testCtx(t)
	for len(out) < n && ctx.Err() == nil {
		cl.PollFetches(ctx).EachRecord(func(r *kgo.Record) { out = append(out, r) })
	}
	if len(out) < n {
		t.Fatalf("%d records on %s, want %d", len(out), tpc, n)
	}
	return out
}

// With Fingerprint, a key reused for another value is not replayed: the
// record is given up to the dead-letter topic.
func TestFingerprintMismatchIsGivenUp(t *testing.T) {
	e := newEnv(t, 1)
	f := newEffects()
	e.start(t, kafka.Options{DeadLetterTopic: dlt, Fingerprint: true, Handler: func(ctx context.Context, r *kafka.Record) error {
		f.add(r.Key + "=" + string(r.Value))
		return nil
	}})
	e.produce(t, 0, "k", 2) // the same value twice: one run
	r := &kgo.Record{Topic: topic, Value: []byte("another value"),
		Headers: []kgo.RecordHeader{{Key: kafka.DefaultKeyHeader, Value: []byte("k")}}}
	if err := e.prod.ProduceSync(testCtx(t), r).FirstErr(); err != nil {
		t.Fatal(err)
	}
	e.allCommitted(t, 1)
	if n := f.get("k=value of k"); n != 1 {
		t.Errorf("the first value ran %d times, want 1", n)
	}
	if n := f.get("k=another value"); n != 0 {
		t.Errorf("the other value ran %d times, want 0", n)
	}
	if recs := e.read(t, dlt, 1); string(recs[0].Value) != "another value" {
		t.Errorf("dead letter %q", recs[0].Value)
	}
}

// A partition whose goroutine falls behind is paused once 1,000 records
// wait, and resumed once they are handled.
func TestFullQueuePausesThePartition(t *testing.T) {
	e := newEnv(t, 1)
	gate := make(chan struct{})
	var handled atomic.Int64
	member := e.start(t, kafka.Options{Handler: func(ctx context.Context, r *kafka.Record) error {
		if r.Key == "first" {
			<-gate
		}
		handled.Add(1)
		return nil
	}})
	e.produce(t, 0, "first", 1)
	ctx := testCtx(t)
	for i := range 1500 {
		r := &kgo.Record{Topic: topic, Value: []byte("v"),
			Headers: []kgo.RecordHeader{{Key: kafka.DefaultKeyHeader, Value: fmt.Appendf(nil, "r%d", i)}}}
		e.prod.Produce(ctx, r, func(_ *kgo.Record, err error) {
			if err != nil {
				t.Error(err)
			}
		})
	}
	if err := e.prod.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	paused := func() bool { return slices.Contains(member.Client().PauseFetchPartitions(nil)[topic], 0) }
	idemtest.Eventually(t, "the partition paused behind its blocked record", paused)
	close(gate)
	e.allCommitted(t, 1)
	if n := handled.Load(); n != 1501 {
		t.Errorf("%d records handled, want 1501", n)
	}
	if paused() {
		t.Error("the partition is still paused with its queue empty")
	}
}
