package sqs_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/sqs"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/sqstest"
	"github.com/idemrt/idem/store"
)

// A message sent three times (a producer that retried) and received by
// one consumer that handles ten at once: its effect happens once, every
// copy is deleted.
func TestDuplicatesRunOnce(t *testing.T) {
	e := newEnv(t, 5, nil)
	l := newLedger()
	keys := []string{"order-1", "order-2", "order-3"}
	for range 3 {
		for _, k := range keys {
			e.send(t, k, "charge "+k)
		}
	}
	a := e.adapter(t, sqs.Options{OnVerdict: l.onVerdict, Handler: func(ctx context.Context, m *sqs.Message) error {
		l.effect(m.Key)
		time.Sleep(50 * time.Millisecond) // the copies arrive while it runs
		return nil
	}})
	run(t, a)
	idemtest.Eventually(t, "every copy deleted", func() bool { return e.count(t) == 0 })
	for _, k := range keys {
		if n := l.count(k); n != 1 {
			t.Errorf("%s: %d effects, want 1", k, n)
		}
		for _, d := range l.decisions(k) {
			if d != consume.Ack {
				t.Errorf("%s: decisions %v, want only ack", k, l.decisions(k))
			}
		}
	}
}

// The message is deleted only once its result is stored: a handler that
// fails leaves it in the queue, and the delete of the retry that succeeds
// finds the result in the store.
func TestDeleteOnlyAfterStore(t *testing.T) {
	e := newEnv(t, 5, nil)
	c := consumer(t, idem.Options{}, consume.Options{})
	rec := newRecorder(e.cl)
	var deletes atomic.Int32
	var stored atomic.Bool
	var idemKey atomic.Value
	rec.onDelete = func(*awssqs.DeleteMessageInput) {
		deletes.Add(1)
		k, _ := idemKey.Load().(string)
		_, err := idem.Get[struct{}](context.Background(), c.Runtime(), k)
		stored.Store(err == nil)
	}
	l := newLedger()
	var runs atomic.Int32
	queued := make(chan int, 2)
	a := e.adapter(t, sqs.Options{Consumer: c, Client: rec, OnVerdict: l.onVerdict,
		Handler: func(ctx context.Context, m *sqs.Message) error {
			idemKey.Store(m.IdemKey)
			queued <- queuedNow(e) // the message is still in the queue while its handler runs
			if runs.Add(1) == 1 {
				return errors.New("the payment service is down")
			}
			l.effect(m.Key)
			return nil
		}})
	e.send(t, "order-1", "x")
	run(t, a)
	if n := idemtest.Recv(t, queued); n != 1 {
		t.Fatalf("%d messages in the queue during the first run, want 1", n)
	}
	if n := idemtest.Recv(t, queued); n != 1 {
		t.Fatalf("%d messages in the queue during the retry, want 1", n)
	}
	idemtest.Eventually(t, "the message deleted and reported", func() bool {
		return e.count(t) == 0 && len(l.decisions("order-1")) == 2
	})
	if d := l.decisions("order-1"); len(d) != 2 || d[0] != consume.Retry || d[1] != consume.Ack {
		t.Errorf("decisions %v, want [retry ack]", d)
	}
	if deletes.Load() != 1 || !stored.Load() {
		t.Errorf("%d deletes, result stored at the delete: %v; want 1 delete, after the store", deletes.Load(), stored.Load())
	}
	if n := l.count("order-1"); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
}

// A transient error gives the message back for the retry delay: it is not
// received again before it.
func TestTransientRetryAfterDelay(t *testing.T) {
	const delay = 2 * time.Second
	e := newEnv(t, 5, nil)
	c := consumer(t, idem.Options{}, consume.Options{MinDelay: delay, MaxDelay: delay})
	var mu sync.Mutex
	var runs []time.Time
	failed := make(chan time.Time, 1)
	a := e.adapter(t, sqs.Options{Consumer: c, Handler: func(ctx context.Context, m *sqs.Message) error {
		mu.Lock()
		defer mu.Unlock()
		runs = append(runs, time.Now())
		if len(runs) == 1 {
			failed <- time.Now()
			return errors.New("transient")
		}
		return nil
	}})
	e.send(t, "order-1", "x")
	run(t, a)
	at := idemtest.Recv(t, failed)
	idemtest.Eventually(t, "the retry deleted", func() bool { return e.count(t) == 0 })
	mu.Lock()
	defer mu.Unlock()
	if len(runs) != 2 {
		t.Fatalf("%d runs, want 2", len(runs))
	}
	if gap := runs[1].Sub(at); gap < delay {
		t.Errorf("the retry came %v after the failure, before the %v delay", gap, delay)
	}
}

// A permanent error deletes the message (Delete), or leaves it (Leave) for
// the redrive policy to move to the dead-letter queue; the handler runs
// once either way.
func TestPermanent(t *testing.T) {
	declined := idem.Permanent(errors.New("card declined"))
	t.Run("delete", func(t *testing.T) {
		e := newEnv(t, 1, nil)
		l := newLedger()
		a := e.adapter(t, sqs.Options{OnVerdict: l.onVerdict, Handler: func(ctx context.Context, m *sqs.Message) error {
			l.effect(m.Key)
			return declined
		}})
		e.send(t, "order-1", "x")
		run(t, a)
		idemtest.Eventually(t, "the message deleted and reported", func() bool {
			return e.count(t) == 0 && len(l.decisions("order-1")) > 0
		})
		if d := l.decisions("order-1"); len(d) == 0 || d[0] != consume.Term {
			t.Errorf("decisions %v, want term", d)
		}
		if n := l.count("order-1"); n != 1 {
			t.Errorf("%d runs, want 1", n)
		}
	})
	t.Run("leave", func(t *testing.T) {
		dlq := newEnv(t, 1, nil)
		e := newEnv(t, 1, map[string]string{
			"RedrivePolicy": fmt.Sprintf(`{"maxReceiveCount":"1","deadLetterTargetArn":%q}`, sqstest.ARN(dlq.name)),
		})
		l := newLedger()
		a := e.adapter(t, sqs.Options{OnPermanent: sqs.Leave, OnVerdict: l.onVerdict,
			Handler: func(ctx context.Context, m *sqs.Message) error {
				l.effect(m.Key)
				return declined
			}})
		e.send(t, "order-1", "x")
		run(t, a)
		idemtest.Eventually(t, "the message in the dead-letter queue, after two receives", func() bool {
			return dlq.count(t) == 1 && len(l.decisions("order-1")) >= 2
		})
		if n := e.count(t); n != 0 {
			t.Errorf("%d messages left in the queue, want 0", n)
		}
		d := l.decisions("order-1")
		if len(d) == 0 {
			t.Fatal("no verdict")
		}
		for _, x := range d {
			if x != consume.Term {
				t.Errorf("decisions %v, want only term", d)
			}
		}
		if n := l.count("order-1"); n != 1 {
			t.Errorf("%d runs, want 1 (the receives after the first replay the error)", n)
		}
		// goaws moves it after the second receive (SQS after the
		// maxReceiveCount-th): that receive replayed the stored error.
		l.mu.Lock()
		if v := l.verdicts["order-1"]; len(v) != 2 || !v[1].Replayed() {
			t.Errorf("verdicts %v, want two, the second replayed", v)
		}
		l.mu.Unlock()
		m, ok := dlq.receive(t)
		if !ok || aws.ToString(m.Body) != "x" {
			t.Errorf("dead-letter queue gave %v, %v; want the message", m.Body, ok)
		}
	})
}

// A handler that outlasts the visibility timeout several times keeps its
// message: it is received once.
func TestVisibilityExtendedWhileRunning(t *testing.T) {
	e := newEnv(t, 2, nil)
	rec := newRecorder(e.cl)
	var extensions atomic.Int32
	rec.onVisible = func(*awssqs.ChangeMessageVisibilityInput) { extensions.Add(1) }
	var runs atomic.Int32
	gate := make(chan struct{})
	a := e.adapter(t, sqs.Options{Client: rec, Extend: 400 * time.Millisecond, Handler: func(ctx context.Context, m *sqs.Message) error {
		runs.Add(1)
		<-gate // the slow handler
		return nil
	}})
	e.send(t, "order-1", "x")
	run(t, a)
	// Two visibility timeouts: an extension every fifth of one.
	idemtest.Eventually(t, "ten extensions", func() bool { return extensions.Load() >= 10 })
	close(gate)
	idemtest.Eventually(t, "the message deleted", func() bool { return e.count(t) == 0 })
	for id, n := range rec.receives() {
		if n != 1 {
			t.Errorf("message %s received %d times, want 1", id, n)
		}
	}
	if n := runs.Load(); n != 1 {
		t.Errorf("%d runs, want 1", n)
	}
}

// Extensions stop at MaxVisibility after the receive (12h on SQS, 3s
// here): the message becomes visible then, while its handler still runs;
// the second receive waits for the run, and its effect happens once.
func TestMaxVisibilityCapsExtensions(t *testing.T) {
	const limit = 3 * time.Second
	e := newEnv(t, 1, nil)
	rec := newRecorder(e.cl)
	var mu sync.Mutex
	var firstReceive time.Time
	var latest time.Time // the latest end of invisibility asked for
	rec.onVisible = func(in *awssqs.ChangeMessageVisibilityInput) {
		mu.Lock()
		defer mu.Unlock()
		if end := time.Now().Add(time.Duration(in.VisibilityTimeout) * time.Second); end.After(latest) {
			latest = end
		}
	}
	l := newLedger()
	gate := make(chan struct{})
	a := e.adapter(t, sqs.Options{Client: rec, VisibilityTimeout: time.Second, Extend: 300 * time.Millisecond,
		MaxVisibility: limit, OnVerdict: l.onVerdict,
		Handler: func(ctx context.Context, m *sqs.Message) error {
			mu.Lock()
			firstReceive = m.ReceivedAt
			mu.Unlock()
			l.effect(m.Key)
			<-gate
			return nil
		}})
	e.send(t, "order-1", "x")
	run(t, a)
	idemtest.Eventually(t, "the message received again past the limit", func() bool {
		for _, n := range rec.receives() {
			if n >= 2 {
				return true
			}
		}
		return false
	})
	close(gate)
	idemtest.Eventually(t, "the message deleted", func() bool { return e.count(t) == 0 })
	mu.Lock()
	defer mu.Unlock()
	if latest.IsZero() {
		t.Fatal("no visibility extension")
	}
	if over := latest.Sub(firstReceive.Add(limit)); over > 0 {
		t.Errorf("an extension asked for invisibility %v past MaxVisibility", over)
	}
	if n := l.count("order-1"); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
}

// A message without a key never runs; by default it is deleted.
func TestMissingKey(t *testing.T) {
	e := newEnv(t, 1, nil)
	l := newLedger()
	var runs atomic.Int32
	a := e.adapter(t, sqs.Options{OnVerdict: l.onVerdict, Handler: func(ctx context.Context, m *sqs.Message) error {
		runs.Add(1)
		return nil
	}})
	e.send(t, "", "no key")
	run(t, a)
	idemtest.Eventually(t, "the message deleted and reported", func() bool {
		return e.count(t) == 0 && len(l.decisions("")) == 1
	})
	if d := l.decisions(""); len(d) != 1 || d[0] != consume.Term {
		t.Errorf("decisions %v, want [term]", d)
	}
	if n := runs.Load(); n != 0 {
		t.Errorf("%d runs, want 0", n)
	}
}

// Process, for a loop of the user's: the key falls back to a FIFO queue's
// MessageDeduplicationId (which goaws does not return, so the test sets
// it as SQS would), and a message is answered once handled.
func TestProcessKeysByDeduplicationID(t *testing.T) {
	e := newEnv(t, 5, nil)
	l := newLedger()
	a := e.adapter(t, sqs.Options{OnVerdict: l.onVerdict, Handler: func(ctx context.Context, m *sqs.Message) error {
		l.effect(m.Key)
		return nil
	}})
	for range 2 {
		e.send(t, "", "x")
	}
	for range 2 {
		m, ok := e.receive(t)
		if !ok {
			t.Fatal("no message")
		}
		if m.Attributes == nil {
			m.Attributes = map[string]string{}
		}
		m.Attributes["MessageDeduplicationId"] = "dedup-1"
		v, err := a.Process(testCtx(t), m)
		if err != nil || v.Decision != consume.Ack {
			t.Fatalf("Process: %v, %v; want ack", v, err)
		}
	}
	if n := l.count("dedup-1"); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
	if n := e.count(t); n != 0 {
		t.Errorf("%d messages left, want 0", n)
	}
	if _, err := a.Process(testCtx(t), types.Message{}); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("Process without a receipt handle: %v, want ErrInvalidArgument", err)
	}
}

func TestKeyFunctions(t *testing.T) {
	e := newEnv(t, 5, nil)
	e.send(t, "k", "x")
	m, ok := e.receive(t)
	if !ok {
		t.Fatal("no message")
	}
	if got := sqs.Attribute(sqs.KeyAttribute)(m); got != "k" {
		t.Errorf("Attribute: %q, want k", got)
	}
	if got := sqs.Attribute("Other")(m); got != "" {
		t.Errorf("Attribute of a missing attribute: %q", got)
	}
	if got := sqs.MessageID(m); got == "" || got != aws.ToString(m.MessageId) {
		t.Errorf("MessageID: %q", got)
	}
	if got := sqs.DeduplicationID(m); got != "" {
		t.Errorf("DeduplicationID of a standard queue's message: %q", got)
	}
}

func TestNewRefusesBadOptions(t *testing.T) {
	e := newEnv(t, 5, nil)
	c := consumer(t, idem.Options{}, consume.Options{})
	h := func(context.Context, *sqs.Message) error { return nil }
	good := sqs.Options{Consumer: c, Client: e.cl, QueueURL: e.url, Handler: h}
	for name, edit := range map[string]func(*sqs.Options){
		"no consumer":          func(o *sqs.Options) { o.Consumer = nil },
		"zero consumer":        func(o *sqs.Options) { o.Consumer = &consume.Consumer{} },
		"no client":            func(o *sqs.Options) { o.Client = nil },
		"no queue":             func(o *sqs.Options) { o.QueueURL = "" },
		"no handler":           func(o *sqs.Options) { o.Handler = nil },
		"negative visibility":  func(o *sqs.Options) { o.VisibilityTimeout = -time.Second },
		"visibility unitless":  func(o *sqs.Options) { o.VisibilityTimeout = 30 },
		"extend unitless":      func(o *sqs.Options) { o.Extend = 10 },
		"extend too long":      func(o *sqs.Options) { o.VisibilityTimeout, o.Extend = 2*time.Second, 2*time.Second },
		"over 12h":             func(o *sqs.Options) { o.MaxVisibility = 13 * time.Hour },
		"wait over 20s":        func(o *sqs.Options) { o.WaitTime = 21 * time.Second },
		"negative concurrency": func(o *sqs.Options) { o.Concurrency = -1 },
		"huge answer timeout":  func(o *sqs.Options) { o.AnswerTimeout = math.MaxInt64 },
		"negative answer":      func(o *sqs.Options) { o.AnswerTimeout = -time.Second },
		"bad OnPermanent":      func(o *sqs.Options) { o.OnPermanent = 9 },
		// A scope no key can be built in: every message would be given
		// up (deleted) unrun, as idem refuses its keys.
		"scope too long":               func(o *sqs.Options) { o.Scope = strings.Repeat("s", store.MaxKeyLen) },
		"scope with NUL":               func(o *sqs.Options) { o.Scope = "orders\x00eu" },
		"queue URL too long, no scope": func(o *sqs.Options) { o.QueueURL = e.url + "/" + strings.Repeat("q", store.MaxKeyLen) },
	} {
		o := good
		edit(&o)
		if _, err := sqs.New(o); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", name, err)
		}
	}
	if _, err := sqs.New(good); err != nil {
		t.Errorf("good options: %v", err)
	}
	var nilAdapter *sqs.Adapter
	if err := nilAdapter.Run(context.Background()); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("Run on a nil adapter: %v", err)
	}
}

// queuedNow is the number of messages in e's queue (-1 if unknown), for
// goroutines that cannot fail the test.
func queuedNow(e *env) (n int) {
	defer func() {
		if recover() != nil {
			n = -1
		}
	}()
	return queued(e.cl, e.url)
}

// Run stops when its context ends: the message whose handler still runs
// is given back (Retry) and stays in the queue; the handler goes on,
// detached, and stores its result for the next receive to replay.
func TestRunStopsOnCancel(t *testing.T) {
	e := newEnv(t, 5, nil)
	c := consumer(t, idem.Options{}, consume.Options{})
	l := newLedger()
	started := make(chan struct{})
	gate := make(chan struct{})
	a := e.adapter(t, sqs.Options{Consumer: c, OnVerdict: l.onVerdict, Handler: func(ctx context.Context, m *sqs.Message) error {
		close(started)
		<-gate
		l.effect(m.Key)
		return nil
	}})
	e.send(t, "order-1", "x")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	idemtest.Recv(t, started)
	cancel()
	if err := idemtest.Recv(t, done); !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v, want context.Canceled", err)
	}
	if d := l.decisions("order-1"); len(d) != 1 || d[0] != consume.Retry {
		t.Errorf("decisions %v, want [retry]", d)
	}
	if n := e.count(t); n != 1 {
		t.Errorf("%d messages in the queue, want 1", n)
	}
	close(gate)
	// The next consumer replays the detached run's result.
	b := e.adapter(t, sqs.Options{Consumer: c, OnVerdict: l.onVerdict, Handler: func(ctx context.Context, m *sqs.Message) error {
		l.effect(m.Key)
		return nil
	}})
	run(t, b)
	idemtest.Eventually(t, "the message deleted", func() bool { return e.count(t) == 0 })
	if n := l.count("order-1"); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
}

// A copy received by a second consumer while the first copy's handler
// runs waits for it (Settle), its visibility extended meanwhile: it is
// received once, and acknowledged with the first run's result.
func TestWaitingDuplicateKeptInvisible(t *testing.T) {
	e := newEnv(t, 2, nil)
	c := consumer(t, idem.Options{}, consume.Options{Policy: idem.Policy{Settle: 10 * time.Second}})
	rec := newRecorder(e.cl)
	var extMu sync.Mutex
	extensions := map[string]int{} // per receipt handle
	rec.onVisible = func(in *awssqs.ChangeMessageVisibilityInput) {
		extMu.Lock()
		extensions[aws.ToString(in.ReceiptHandle)]++
		extMu.Unlock()
	}
	l := newLedger()
	started := make(chan struct{})
	gate := make(chan struct{})
	slow := e.adapter(t, sqs.Options{Consumer: c, Client: rec, OnVerdict: l.onVerdict, Extend: 400 * time.Millisecond,
		Handler: func(ctx context.Context, m *sqs.Message) error {
			l.effect(m.Key)
			close(started)
			<-gate
			return nil
		}})
	e.send(t, "order-1", "x")
	run(t, slow)
	idemtest.Recv(t, started)
	waiter := e.adapter(t, sqs.Options{Consumer: c, Client: rec, OnVerdict: l.onVerdict, Extend: 400 * time.Millisecond,
		Handler: func(ctx context.Context, m *sqs.Message) error {
			l.effect(m.Key)
			return nil
		}})
	e.send(t, "order-1", "x") // the producer's retry
	run(t, waiter)
	idemtest.Eventually(t, "both copies received", func() bool { return len(rec.receives()) == 2 })
	// Both copies kept invisible past two visibility timeouts (an
	// extension every fifth of one), while the first run holds the key.
	idemtest.Eventually(t, "both copies extended ten times", func() bool {
		extMu.Lock()
		defer extMu.Unlock()
		if len(extensions) != 2 {
			return false
		}
		for _, n := range extensions {
			if n < 10 {
				return false
			}
		}
		return true
	})
	close(gate)
	idemtest.Eventually(t, "both copies deleted and reported", func() bool {
		return e.count(t) == 0 && len(l.decisions("order-1")) == 2
	})
	for id, n := range rec.receives() {
		if n != 1 {
			t.Errorf("message %s received %d times, want 1", id, n)
		}
	}
	if n := l.count("order-1"); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
	var joined int
	l.mu.Lock()
	for _, v := range l.verdicts["order-1"] {
		if v.Decision == consume.Ack && v.Outcome == idem.Joined {
			joined++
		}
	}
	l.mu.Unlock()
	if joined != 1 {
		t.Errorf("verdicts %v, want one ack joined", l.verdicts["order-1"])
	}
}

// A receive that fails (a queue that does not exist) is logged and tried
// again after a backoff, until Run's context ends.
func TestRunRetriesFailedReceives(t *testing.T) {
	e := newEnv(t, 1, nil)
	var fails atomic.Int32
	a := e.adapter(t, sqs.Options{QueueURL: e.url + "-missing", Client: failCounter{e.cl, &fails}, Handler: noop})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	idemtest.Eventually(t, "receives tried again", func() bool { return fails.Load() >= 3 })
	cancel()
	if err := idemtest.Recv(t, done); !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v, want context.Canceled", err)
	}
}

// failCounter counts the receives that fail.
type failCounter struct {
	sqs.Client
	n *atomic.Int32
}

func (f failCounter) ReceiveMessage(ctx context.Context, in *awssqs.ReceiveMessageInput, opts ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error) {
	out, err := f.Client.ReceiveMessage(ctx, in, opts...)
	if err != nil {
		f.n.Add(1)
	}
	return out, err
}

// A retry after MaxVisibility asks for no delay past it: the message is
// made visible at once (visibility 0) rather than refused by SQS.
func TestRetryDelayWithinMaxVisibility(t *testing.T) {
	const limit = 2 * time.Second
	e := newEnv(t, 1, nil)
	c := consumer(t, idem.Options{}, consume.Options{MinDelay: 5 * time.Second, MaxDelay: 5 * time.Second})
	rec := newRecorder(e.cl)
	var mu sync.Mutex
	var asked []int32
	rec.onVisible = func(in *awssqs.ChangeMessageVisibilityInput) {
		mu.Lock()
		asked = append(asked, in.VisibilityTimeout)
		mu.Unlock()
	}
	var runs atomic.Int32
	a := e.adapter(t, sqs.Options{Consumer: c, Client: rec, Concurrency: 1, MaxVisibility: limit,
		Handler: func(ctx context.Context, m *sqs.Message) error {
			if runs.Add(1) == 1 {
				for time.Since(m.ReceivedAt) <= limit { // the handler outlasts MaxVisibility
					time.Sleep(50 * time.Millisecond)
				}
				return errors.New("transient")
			}
			return nil
		}})
	e.send(t, "order-1", "x")
	run(t, a)
	idemtest.Eventually(t, "the retry deleted", func() bool { return e.count(t) == 0 })
	mu.Lock()
	defer mu.Unlock()
	if !slices.Contains(asked, 0) { // extensions never ask for 0: only the retry does
		t.Errorf("visibility asked for %v; want the retry's at 0", asked)
	}
	for _, s := range asked {
		if time.Duration(s)*time.Second > limit {
			t.Errorf("visibility of %ds asked for, past MaxVisibility %v", s, limit)
		}
	}
}

// A retry delay longer than SQS can count in its int32 seconds (a
// consumer's MaxDelay of a century: "no retry soon") keeps the message
// away as long as SQS allows, up to MaxVisibility: it does not wrap
// around into a negative delay that makes the message visible at once.
func TestHugeRetryDelayStaysAway(t *testing.T) {
	const century = 100 * 365 * 24 * time.Hour
	// A century is also the longest delay consume.New accepts
	// (store.MaxDuration): longer ones are refused there.
	for _, delay := range []time.Duration{century, century - time.Nanosecond} {
		e := newEnv(t, 5, nil)
		c := consumer(t, idem.Options{}, consume.Options{MinDelay: delay, MaxDelay: delay})
		rec := newRecorder(e.cl)
		var mu sync.Mutex
		var asked []int32
		rec.onVisible = func(in *awssqs.ChangeMessageVisibilityInput) {
			mu.Lock()
			asked = append(asked, in.VisibilityTimeout)
			mu.Unlock()
		}
		a := e.adapter(t, sqs.Options{Consumer: c, Client: rec, Handler: func(context.Context, *sqs.Message) error {
			return errors.New("transient")
		}})
		e.send(t, "order-1", "x")
		m, ok := e.receive(t)
		if !ok {
			t.Fatal("no message")
		}
		v, err := a.Process(testCtx(t), m)
		if v.Decision != consume.Retry || v.Delay != delay {
			t.Fatalf("verdict %v, %v; want a retry after %v", v, err, delay)
		}
		mu.Lock()
		// MaxVisibility (12h less a minute) after the receive, less
		// the time Process took (a loaded machine's).
		want := int32((sqs.DefaultMaxVisibility - idemtest.Timeout) / time.Second)
		if len(asked) != 1 || asked[0] < want || asked[0] > int32(sqs.DefaultMaxVisibility/time.Second) {
			t.Errorf("delay %v: visibility asked %v, want [%d..%d]", delay, asked, want, sqs.DefaultMaxVisibility/time.Second)
		}
		mu.Unlock()
	}
}

// A producer that sets the key attribute as a Binary attribute (the key's
// bytes) has its messages keyed by those bytes: they run once, instead of
// being taken for keyless and deleted unrun.
func TestBinaryKeyAttribute(t *testing.T) {
	e := newEnv(t, 5, nil)
	for range 2 {
		_, err := e.cl.SendMessage(testCtx(t), &awssqs.SendMessageInput{QueueUrl: &e.url, MessageBody: aws.String("x"),
			MessageAttributes: map[string]types.MessageAttributeValue{
				sqs.KeyAttribute: {DataType: aws.String("Binary"), BinaryValue: []byte("order-9")},
			}})
		if err != nil {
			t.Fatal(err)
		}
	}
	l := newLedger()
	a := e.adapter(t, sqs.Options{OnVerdict: l.onVerdict, Concurrency: 1, Handler: func(ctx context.Context, m *sqs.Message) error {
		l.effect(m.Key)
		return nil
	}})
	run(t, a)
	idemtest.Eventually(t, "both copies answered", func() bool {
		return len(l.decisions("order-9"))+len(l.decisions("")) == 2
	})
	if d := l.decisions("order-9"); len(d) != 2 || d[0] != consume.Ack || d[1] != consume.Ack {
		t.Errorf("decisions %v (keyless: %v), want [ack ack] under key order-9", d, l.decisions(""))
	}
	if n := l.count("order-9"); n != 1 {
		t.Errorf("%d effects, want 1", n)
	}
}

// receiveSpy reports each receive's MaxNumberOfMessages to onReceive
// before the call.
type receiveSpy struct {
	sqs.Client
	onReceive func(n int32)
}

func (r receiveSpy) ReceiveMessage(ctx context.Context, in *awssqs.ReceiveMessageInput, opts ...func(*awssqs.Options)) (*awssqs.ReceiveMessageOutput, error) {
	r.onReceive(in.MaxNumberOfMessages)
	return r.Client.ReceiveMessage(ctx, in, opts...)
}

// Run handles at most Concurrency messages at once and asks for no more
// than it has room for: handlers running plus messages asked for never
// pass Concurrency.
func TestRunBoundsConcurrency(t *testing.T) {
	const limit, total = 3, 12
	e := newEnv(t, 30, nil)
	for i := range total {
		e.send(t, fmt.Sprintf("order-%d", i), "x")
	}
	var mu sync.Mutex
	running, most := 0, 0
	var over []string
	spy := receiveSpy{Client: e.cl, onReceive: func(n int32) {
		mu.Lock()
		defer mu.Unlock()
		if running+int(n) > limit {
			over = append(over, fmt.Sprintf("asked for %d with %d running", n, running))
		}
	}}
	l := newLedger()
	a := e.adapter(t, sqs.Options{Client: spy, Concurrency: limit, OnVerdict: l.onVerdict,
		Handler: func(ctx context.Context, m *sqs.Message) error {
			mu.Lock()
			running++
			most = max(most, running)
			mu.Unlock()
			time.Sleep(20 * time.Millisecond) // overlap with the others
			mu.Lock()
			running--
			mu.Unlock()
			l.effect(m.Key)
			return nil
		}})
	run(t, a)
	idemtest.Eventually(t, "every message deleted", func() bool { return e.count(t) == 0 })
	mu.Lock()
	defer mu.Unlock()
	if most > limit {
		t.Errorf("%d handlers at once, want at most %d", most, limit)
	}
	if len(over) > 0 {
		t.Errorf("receives past Concurrency: %v", over)
	}
}
