package natsjs_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/natstest"
)

// record is a handler whose effect is a count in l.
func record(l *ledger) natsjs.HandlerFunc {
	return func(_ context.Context, m *natsjs.Message) error {
		l.effect(m.Key)
		return nil
	}
}

// publishAgain publishes id again once the stream's duplicate window has
// passed (until the server stores it as a new message).
func (e *env) publishAgain(t *testing.T, id string) {
	t.Helper()
	idemtest.Eventually(t, "a publish past the duplicate window", func() bool {
		if e.publish(t, id).Duplicate {
			time.Sleep(50 * time.Millisecond) // the window is 200ms
			return false
		}
		return true
	})
}

func TestDuplicatePublishPastTheWindowReplays(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{dupWindow: 200 * time.Millisecond})
	l := newLedger()
	a := e.adapter(t, idem.Options{}, consume.Options{}, natsjs.Options{OnVerdict: l.onVerdict})
	e.consume(t, a.Handler(context.Background(), record(l)))
	ids := keys("m", 10)
	for _, id := range ids {
		e.publish(t, id)
	}
	for _, id := range ids {
		l.waitVerdicts(t, id, 1)
	}
	for _, id := range ids {
		e.publishAgain(t, id)
	}
	for _, id := range ids {
		if got := l.waitVerdicts(t, id, 2); !slices.Equal(got, []string{"ack/executed@1", "ack/replayed@1"}) {
			t.Errorf("%s: verdicts %v, want ack/executed then ack/replayed", id, got)
		}
	}
	e.settled(t)
	l.exactlyOnce(t, ids)
	if ci := e.info(t); ci.Delivered.Stream != 20 || ci.NumRedelivered != 0 {
		t.Errorf("consumer delivered %d stream messages (%d redelivered), want 20 (0)", ci.Delivered.Stream, ci.NumRedelivered)
	}
}

// lostAck drops the acknowledgements of a message's first delivery.
type lostAck struct{ jetstream.Msg }

func (lostAck) Ack() error { return nil }

func TestRedeliveryAfterALostAckReplays(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{ackWait: 300 * time.Millisecond})
	l := newLedger()
	a := e.adapter(t, idem.Options{}, consume.Options{}, natsjs.Options{OnVerdict: l.onVerdict})
	h := record(l)
	e.consume(t, func(msg jetstream.Msg) {
		if md, err := msg.Metadata(); err == nil && md.NumDelivered == 1 {
			msg = lostAck{msg}
		}
		_, _ = a.Process(context.Background(), msg, h)
	})
	ids := keys("m", 10)
	for _, id := range ids {
		e.publish(t, id)
	}
	for _, id := range ids {
		got := l.waitVerdicts(t, id, 2)
		if !slices.Equal(got, []string{"ack/executed@1", "ack/replayed@2"}) {
			t.Errorf("%s: verdicts %v, want ack/executed@1 then ack/replayed@2", id, got)
		}
	}
	e.settled(t)
	l.exactlyOnce(t, ids)
}

// A handler that runs longer than AckWait is kept in progress, at the
// default Progress: a third of the AckWait ForConsumer read from the
// consumer (an adapter that missed it would report every 10s, too late).
// The margin, AckWait less Progress, is 2s, for a loaded machine.
func TestSlowHandlerIsKeptInProgress(t *testing.T) { onEachServer(t, testSlowHandlerIsKeptInProgress) }

func testSlowHandlerIsKeptInProgress(t *testing.T, server natstest.Kind) {
	e := newEnv(t, setup{ackWait: 3 * time.Second, server: server})
	l := newLedger()
	a := e.adapter(t, idem.Options{}, consume.Options{}, natsjs.Options{OnVerdict: l.onVerdict})
	var mu sync.Mutex
	deliveries := 0
	slow := func(ctx context.Context, m *natsjs.Message) error {
		time.Sleep(4 * time.Second) // past AckWait
		l.effect(m.Key)
		return nil
	}
	e.consume(t, func(msg jetstream.Msg) {
		mu.Lock()
		deliveries++
		mu.Unlock()
		_, _ = a.Process(context.Background(), msg, slow)
	})
	e.publish(t, "slow")
	if got := l.waitVerdicts(t, "slow", 1); !slices.Equal(got, []string{"ack/executed@1"}) {
		t.Errorf("verdicts %v", got)
	}
	e.settled(t)
	time.Sleep(200 * time.Millisecond) // a redelivery already on its way would show
	mu.Lock()
	defer mu.Unlock()
	if ci := e.info(t); deliveries != 1 || ci.NumRedelivered != 0 {
		t.Errorf("%d deliveries (%d redelivered), want 1 (0)", deliveries, ci.NumRedelivered)
	}
	l.exactlyOnce(t, []string{"slow"})
}

func TestPermanentErrorTerminatesAndTheDuplicateToo(t *testing.T) {
	onEachServer(t, testPermanentErrorTerminatesAndTheDuplicateToo)
}

func testPermanentErrorTerminatesAndTheDuplicateToo(t *testing.T, server natstest.Kind) {
	e := newEnv(t, setup{dupWindow: 200 * time.Millisecond, ackWait: 300 * time.Millisecond, server: server})
	l := newLedger()
	a := e.adapter(t, idem.Options{}, consume.Options{}, natsjs.Options{OnVerdict: l.onVerdict})
	declined := errors.New("card declined")
	e.consume(t, a.Handler(context.Background(), func(_ context.Context, m *natsjs.Message) error {
		l.effect(m.Key)
		if m.Key == "bad" {
			return idem.Permanent(declined)
		}
		return nil
	}))
	e.publish(t, "bad")
	e.publish(t, "good")
	l.waitVerdicts(t, "good", 1)
	if got := l.waitVerdicts(t, "bad", 1); !slices.Equal(got, []string{"term/executed@1"}) {
		t.Fatalf("verdicts %v", got)
	}
	time.Sleep(600 * time.Millisecond) // two AckWaits: a redelivery would show
	e.settled(t)
	if got := l.verdictsOf("bad"); len(got) != 1 {
		t.Fatalf("the terminated message was delivered again: %v", got)
	}
	e.publishAgain(t, "bad")
	if got := l.waitVerdicts(t, "bad", 2); got[1] != "term/replayed@1" {
		t.Fatalf("the duplicate: verdicts %v, want term/replayed@1", got)
	}
	e.settled(t)
	if ci := e.info(t); ci.NumRedelivered != 0 {
		t.Errorf("%d redelivered", ci.NumRedelivered)
	}
	l.exactlyOnce(t, []string{"bad", "good"})
}

func TestTransientErrorIsRedeliveredAfterADelay(t *testing.T) {
	onEachServer(t, testTransientErrorIsRedeliveredAfterADelay)
}

func testTransientErrorIsRedeliveredAfterADelay(t *testing.T, server natstest.Kind) {
	e := newEnv(t, setup{server: server})
	l := newLedger()
	a := e.adapter(t, idem.Options{}, consume.Options{MinDelay: 100 * time.Millisecond}, natsjs.Options{OnVerdict: l.onVerdict})
	var mu sync.Mutex
	failed := map[string]time.Time{}
	e.consume(t, a.Handler(context.Background(), func(_ context.Context, m *natsjs.Message) error {
		mu.Lock()
		defer mu.Unlock()
		if _, ok := failed[m.Key]; !ok {
			failed[m.Key] = time.Now()
			return errors.New("warehouse unreachable") // before the effect
		}
		if since := time.Since(failed[m.Key]); since < 90*time.Millisecond {
			t.Errorf("%s redelivered %v after its transient error, before the 100ms delay", m.Key, since)
		}
		l.effect(m.Key)
		return nil
	}))
	ids := keys("m", 5)
	for _, id := range ids {
		e.publish(t, id)
	}
	for _, id := range ids {
		if got := l.waitVerdicts(t, id, 2); !slices.Equal(got, []string{"retry/executed@1", "ack/executed@2"}) {
			t.Errorf("%s: verdicts %v", id, got)
		}
	}
	e.settled(t)
	l.exactlyOnce(t, ids)
}

func TestMessageWithoutKeyIsTerminatedUnrun(t *testing.T) {
	onEachServer(t, testMessageWithoutKeyIsTerminatedUnrun)
}

func testMessageWithoutKeyIsTerminatedUnrun(t *testing.T, server natstest.Kind) {
	e := newEnv(t, setup{server: server})
	l := newLedger()
	a := e.adapter(t, idem.Options{}, consume.Options{}, natsjs.Options{OnVerdict: l.onVerdict})
	e.consume(t, a.Handler(context.Background(), record(l)))
	e.publish(t, "")
	if got := l.waitVerdicts(t, "", 1); !slices.Equal(got, []string{"term/none@1"}) {
		t.Fatalf("verdicts %v", got)
	}
	e.settled(t)
	l.exactlyOnce(t, nil)
}

// A DoubleAck is confirmed by the server, on every server.
func TestDoubleAckIsConfirmed(t *testing.T) { onEachServer(t, testDoubleAckIsConfirmed) }

func testDoubleAckIsConfirmed(t *testing.T, server natstest.Kind) {
	e := newEnv(t, setup{server: server})
	l := newLedger()
	var mu sync.Mutex
	var ackErrs []error
	a := e.adapter(t, idem.Options{}, consume.Options{}, natsjs.Options{DoubleAck: true,
		OnVerdict: func(m *natsjs.Message, v consume.Verdict, ackErr error) {
			mu.Lock()
			ackErrs = append(ackErrs, ackErr)
			mu.Unlock()
			l.onVerdict(m, v, ackErr)
		}})
	e.consume(t, a.Handler(context.Background(), record(l)))
	ids := keys("m", 3)
	for _, id := range ids {
		e.publish(t, id)
	}
	for _, id := range ids {
		if got := l.waitVerdicts(t, id, 1); !slices.Equal(got, []string{"ack/executed@1"}) {
			t.Errorf("%s: verdicts %v", id, got)
		}
	}
	e.settled(t)
	mu.Lock()
	defer mu.Unlock()
	for i, err := range ackErrs {
		if err != nil {
			t.Errorf("DoubleAck %d: %v", i, err)
		}
	}
	l.exactlyOnce(t, ids)
}
