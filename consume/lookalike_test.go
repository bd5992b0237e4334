package consume_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
)

// A handler's own transient error that wraps an idem sentinel (from a call
// of its own to another idem key, say) stored nothing: it is retried with
// the backoff, and the redelivery runs the handler again.
func TestHandlerErrorWrappingAnIdemSentinelIsRetried(t *testing.T) {
	for _, sentinel := range []error{idem.ErrFingerprintMismatch, idem.ErrInvalidKey} {
		c := newConsumer(t, idem.Options{}, consume.Options{MinDelay: 10 * time.Millisecond})
		var e effect
		_, vd := consume.Handle(context.Background(), c, delivery("m", 2), e.fn("", fmt.Errorf("payment API: %w", sentinel)))
		check(t, vd, consume.Retry, idem.Executed)
		if vd.Delay != 20*time.Millisecond || !errors.Is(vd.Err, sentinel) {
			t.Fatalf("%v: %+v, want a retry after the backoff of attempt 2", sentinel, vd)
		}
		_, vd = consume.Handle(context.Background(), c, delivery("m", 3), e.fn("ok", nil))
		check(t, vd, consume.Ack, idem.Executed)
		e.want(t, 2)
	}
}

// A panic is not stored, whatever its value: one with a permanent error
// for a value is retried like any panic, and the redelivery runs again.
func TestPanicWithAPermanentValueIsRetried(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{MinDelay: 10 * time.Millisecond})
	_, vd := consume.Handle(context.Background(), c, delivery("m", 1), func(context.Context) (int, error) {
		panic(idem.Permanent(errors.New("bug")))
	})
	var pe *idem.PanicError
	if vd.Decision != consume.Retry || vd.Delay != 10*time.Millisecond || !errors.As(vd.Err, &pe) {
		t.Fatalf("%+v, want a retry with a *PanicError after MinDelay", vd)
	}
	var e effect
	_, vd = consume.Handle(context.Background(), c, delivery("m", 2), e.fn("ok", nil))
	check(t, vd, consume.Ack, idem.Executed)
	e.want(t, 1)
}

// A handler that returns a permanent error made of another key's panic
// error stored it: that is a Term, not a retry.
func TestStoredPermanentErrorOfAnotherKeysPanicTerms(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{})
	nested := &idem.PanicError{Key: "other", Value: "bug"}
	var e effect
	for _, out := range []idem.Outcome{idem.Executed, idem.Replayed} {
		_, vd := consume.Handle(context.Background(), c, delivery("m", 1), e.fn("", idem.Permanent(nested)))
		check(t, vd, consume.Term, out)
	}
	e.want(t, 1)
}

// A stored result that no longer decodes into the handler's type (T
// changed between deployments): the effect happened and the result is
// stored, so the delivery is acknowledged, with the codec error in the
// verdict and a warning logged, instead of retried until the TTL ends.
func TestStoredResultThatNoLongerDecodesIsAcked(t *testing.T) {
	var logs bytes.Buffer
	c := newConsumer(t, idem.Options{}, consume.Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	d := delivery("m", 1)
	_, vd := consume.Handle(context.Background(), c, d, func(context.Context) (string, error) { return "parcel-1", nil })
	check(t, vd, consume.Ack, idem.Executed)
	ran := false
	d.Attempt = 2
	_, vd = consume.Handle(context.Background(), c, d, func(context.Context) (int, error) { ran = true; return 1, nil })
	check(t, vd, consume.Ack, idem.Replayed)
	var ce *idem.CodecError
	if ran || !errors.As(vd.Err, &ce) || ce.Op != "decode" || vd.Delay != 0 {
		t.Fatalf("ran %v, verdict %+v; want an ack carrying the decode error", ran, vd)
	}
	if !strings.Contains(logs.String(), "does not decode") {
		t.Fatalf("no warning logged:\n%s", logs.String())
	}
}

// An idem.WithOutcome in CallOptions does not take the verdict's outcome
// away.
func TestCallOptionsWithOutcomeKeepTheVerdictsOutcome(t *testing.T) {
	var theirs idem.Outcome
	c := newConsumer(t, idem.Options{}, consume.Options{CallOptions: []idem.CallOption{idem.WithOutcome(&theirs)}})
	var e effect
	_, vd := consume.Handle(context.Background(), c, delivery("m", 1), e.fn("v", nil))
	check(t, vd, consume.Ack, idem.Executed)
	_, vd = consume.Handle(context.Background(), c, delivery("m", 2), e.fn("v", nil))
	check(t, vd, consume.Ack, idem.Replayed)
	if !vd.Replayed() {
		t.Fatalf("%+v: a replay not reported as one", vd)
	}
}
