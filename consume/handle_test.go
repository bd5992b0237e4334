package consume_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/internal/idemtest"
)

// newConsumer returns a consumer on a new in-memory runtime of rtOpts.
func newConsumer(t *testing.T, rtOpts idem.Options, o consume.Options) *consume.Consumer {
	t.Helper()
	o.Runtime = idemtest.Runtime(t, rtOpts)
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := consume.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// effect counts the runs of a handler that returns v and err.
type effect struct{ n atomic.Int32 }

func (e *effect) fn(v string, err error) func(context.Context) (string, error) {
	return func(context.Context) (string, error) {
		e.n.Add(1)
		return v, err
	}
}

func (e *effect) want(t *testing.T, n int) {
	t.Helper()
	if got := int(e.n.Load()); got != n {
		t.Fatalf("handler ran %d times, want %d", got, n)
	}
}

func check(t *testing.T, v consume.Verdict, d consume.Decision, out idem.Outcome) {
	t.Helper()
	if v.Decision != d || v.Outcome != out {
		t.Fatalf("verdict %v/%v (delay %v, err %v), want %v/%v", v.Decision, v.Outcome, v.Delay, v.Err, d, out)
	}
}

func delivery(key string, attempt int) consume.Delivery {
	return consume.Delivery{Scope: "S/c", Key: key, Attempt: attempt}
}

func TestAckThenReplay(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{})
	var e effect
	ctx := context.Background()
	v, vd := consume.Handle(ctx, c, delivery("m", 1), e.fn("done", nil))
	check(t, vd, consume.Ack, idem.Executed)
	if v != "done" || vd.Err != nil || vd.Replayed() || vd.Key != "consume:S/c:m" {
		t.Fatalf("first delivery: %q %+v", v, vd)
	}
	v, vd = consume.Handle(ctx, c, delivery("m", 2), e.fn("other", nil))
	check(t, vd, consume.Ack, idem.Replayed)
	if v != "done" || !vd.Replayed() {
		t.Fatalf("redelivery: %q %+v", v, vd)
	}
	e.want(t, 1)
}

func TestScopesKeepKeysApart(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{})
	var e effect
	for _, scope := range []string{"A:b", "A%3Ab", "A", ""} {
		_, vd := consume.Handle(context.Background(), c, consume.Delivery{Scope: scope, Key: "m", Attempt: 1}, e.fn("", nil))
		check(t, vd, consume.Ack, idem.Executed)
	}
	e.want(t, 4)
}

func TestTransientRetriesWithGrowingDelayThenRuns(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{MinDelay: 10 * time.Millisecond, MaxDelay: 50 * time.Millisecond})
	var e effect
	ctx := context.Background()
	boom := errors.New("boom")
	for attempt, want := range map[int]time.Duration{0: 10 * time.Millisecond, 1: 10 * time.Millisecond,
		2: 20 * time.Millisecond, 3: 40 * time.Millisecond, 4: 50 * time.Millisecond, 60: 50 * time.Millisecond} {
		_, vd := consume.Handle(ctx, c, delivery("m", attempt), e.fn("", boom))
		check(t, vd, consume.Retry, idem.Executed)
		if vd.Delay != want || !errors.Is(vd.Err, boom) {
			t.Fatalf("attempt %d: delay %v err %v, want %v boom", attempt, vd.Delay, vd.Err, want)
		}
	}
	_, vd := consume.Handle(ctx, c, delivery("m", 7), e.fn("ok", nil))
	check(t, vd, consume.Ack, idem.Executed) // nothing was stored: the retry ran
	e.want(t, 7)
}

func TestCustomBackoffIsClamped(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{MinDelay: time.Second, MaxDelay: 2 * time.Second,
		Backoff: func(attempt int) time.Duration { return time.Duration(attempt) * 700 * time.Millisecond }})
	boom := errors.New("boom")
	var e effect
	for attempt, want := range map[int]time.Duration{1: time.Second, 2: 1400 * time.Millisecond, 3: 2 * time.Second} {
		_, vd := consume.Handle(context.Background(), c, delivery("m", attempt), e.fn("", boom))
		if vd.Decision != consume.Retry || vd.Delay != want {
			t.Fatalf("attempt %d: %v %v, want retry %v", attempt, vd.Decision, vd.Delay, want)
		}
	}
}

// A Backoff that panics (a table indexed by attempt, too short) is taken
// for the default backoff, with a warning; Handle does not panic.
func TestPanickingBackoffFallsBackToTheDefault(t *testing.T) {
	var logs bytes.Buffer
	table := []time.Duration{time.Second}
	c := newConsumer(t, idem.Options{}, consume.Options{MinDelay: 10 * time.Millisecond,
		Logger:  slog.New(slog.NewTextHandler(&logs, nil)),
		Backoff: func(attempt int) time.Duration { return table[attempt-1] }})
	boom := errors.New("boom")
	var e effect
	_, vd := consume.Handle(context.Background(), c, delivery("m", 1), e.fn("", boom))
	if vd.Decision != consume.Retry || vd.Delay != time.Second {
		t.Fatalf("attempt 1: %+v, want the table's 1s", vd)
	}
	_, vd = consume.Handle(context.Background(), c, delivery("m", 3), e.fn("", boom))
	if vd.Decision != consume.Retry || vd.Delay != 40*time.Millisecond || !errors.Is(vd.Err, boom) {
		t.Fatalf("attempt 3: %+v, want the default backoff (40ms)", vd)
	}
	if !strings.Contains(logs.String(), "Options.Backoff panicked") {
		t.Fatalf("no warning logged:\n%s", logs.String())
	}
}

func TestPanicIsRetried(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{})
	_, vd := consume.Handle(context.Background(), c, delivery("m", 1), func(context.Context) (int, error) { panic("bad") })
	var pe *idem.PanicError
	if vd.Decision != consume.Retry || !errors.As(vd.Err, &pe) {
		t.Fatalf("%+v, want a retry with a *PanicError", vd)
	}
}

func TestPermanentTermsAndDuplicateReplaysIt(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{})
	var e effect
	declined := errors.New("declined")
	_, vd := consume.Handle(context.Background(), c, delivery("m", 1), e.fn("", idem.Permanent(declined)))
	check(t, vd, consume.Term, idem.Executed)
	if !errors.Is(vd.Err, declined) || vd.Delay != 0 {
		t.Fatalf("%+v", vd)
	}
	_, vd = consume.Handle(context.Background(), c, delivery("m", 1), e.fn("ok", nil))
	check(t, vd, consume.Term, idem.Replayed)
	if !idem.IsPermanent(vd.Err) || vd.Err.Error() != "declined" {
		t.Fatalf("duplicate: %+v", vd)
	}
	e.want(t, 1)
}

func TestClassifiedPermanentTerms(t *testing.T) {
	invalid := errors.New("invalid order")
	c := newConsumer(t, idem.Options{Policy: idem.Policy{Classifier: func(err error) bool { return errors.Is(err, invalid) }}}, consume.Options{})
	var e effect
	for _, out := range []idem.Outcome{idem.Executed, idem.Replayed} {
		_, vd := consume.Handle(context.Background(), c, delivery("m", 1), e.fn("", invalid))
		check(t, vd, consume.Term, out)
	}
	e.want(t, 1)
}

func TestDuplicateInFlightJoins(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{})
	g := idemtest.NewGate()
	first := make(chan consume.Verdict, 1)
	go func() {
		_, vd := consume.Handle(context.Background(), c, delivery("m", 1), g.Fn("v", nil))
		first <- vd
	}()
	idemtest.Recv(t, g.Started)
	second := make(chan consume.Verdict, 1)
	go func() {
		_, vd := consume.Handle(context.Background(), c, delivery("m", 1), g.Fn("w", nil))
		second <- vd
	}()
	idemtest.Eventually(t, "the duplicate to wait", func() bool {
		return c.Runtime().Stats().Waiters > 0
	})
	close(g.Open)
	check(t, idemtest.Recv(t, first), consume.Ack, idem.Executed)
	check(t, idemtest.Recv(t, second), consume.Ack, idem.Joined)
	if g.Runs() != 1 {
		t.Fatalf("%d runs", g.Runs())
	}
}
