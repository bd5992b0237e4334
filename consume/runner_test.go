package consume_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
)

// unitKey carries what a test runner hands its handler.
type unitKey struct{}

// unitRunner runs calls through idem.Do, handing fn a "unit of work" in its
// context (as a runner built on pgtx.Do hands it a transaction), and
// counts its calls and the keys it was given.
type unitRunner struct {
	calls int
	keys  []string
}

func (r *unitRunner) run(ctx context.Context, rt *idem.Runtime, key string,
	fn func(context.Context) (string, error), opts ...idem.CallOption) (string, error) {
	r.calls++
	r.keys = append(r.keys, key)
	return idem.Do(ctx, rt, key, func(ctx context.Context) (string, error) {
		return fn(context.WithValue(ctx, unitKey{}, "unit of "+key))
	}, opts...)
}

// The runner makes every call, the replays too; its handler gets what the
// runner gives it, and the verdict is Handle's, outcome included.
func TestHandleWithRunsThroughTheRunner(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{})
	var r unitRunner
	ran := 0
	fn := func(ctx context.Context) (string, error) {
		ran++
		u, _ := ctx.Value(unitKey{}).(string)
		return u, nil
	}
	ctx := context.Background()
	v, vd := consume.HandleWith(ctx, c, delivery("m", 1), r.run, fn)
	check(t, vd, consume.Ack, idem.Executed)
	if v != "unit of consume:S/c:m" {
		t.Fatalf("handler got %q from the runner", v)
	}
	v, vd = consume.HandleWith(ctx, c, delivery("m", 2), r.run, fn)
	check(t, vd, consume.Ack, idem.Replayed)
	if v != "unit of consume:S/c:m" || ran != 1 || r.calls != 2 {
		t.Fatalf("replay %q; handler ran %d times, runner called %d times, want 1 and 2", v, ran, r.calls)
	}
	if r.keys[0] != vd.Key || r.keys[1] != vd.Key {
		t.Fatalf("runner given keys %v, want %q", r.keys, vd.Key)
	}
	// A permanent error through the runner is stored and terms, as in
	// Handle.
	perm := func(context.Context) (string, error) { return "", idem.Permanent(errors.New("refused")) }
	_, vd = consume.HandleWith(ctx, c, delivery("p", 1), r.run, perm)
	check(t, vd, consume.Term, idem.Executed)
	_, vd = consume.HandleWith(ctx, c, delivery("p", 2), r.run, perm)
	check(t, vd, consume.Term, idem.Replayed)
}

// A runner that fails before it calls idem.Do (a misconfigured database,
// say) gets a Retry with the backoff, never an Ack: nothing ran.
func TestHandleWithRunnerErrorRetries(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{MinDelay: 10 * time.Millisecond, MaxDelay: time.Second})
	misconfigured := errors.New("the pool reaches another database")
	ran := false
	run := func(context.Context, *idem.Runtime, string, func(context.Context) (int, error), ...idem.CallOption) (int, error) {
		return 0, misconfigured
	}
	_, vd := consume.HandleWith(context.Background(), c, delivery("m", 3), run, func(context.Context) (int, error) {
		ran = true
		return 1, nil
	})
	check(t, vd, consume.Retry, idem.NoOutcome)
	if vd.Delay != 40*time.Millisecond || !errors.Is(vd.Err, misconfigured) || ran {
		t.Fatalf("verdict %+v (handler ran: %v), want a retry after 40ms with the runner's error", vd, ran)
	}
}

// A nil runner is idem.Do: HandleWith is Handle.
func TestHandleWithNilRunnerIsHandle(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{})
	var e effect
	_, vd := consume.HandleWith(context.Background(), c, delivery("m", 1), nil, e.fn("v", nil))
	check(t, vd, consume.Ack, idem.Executed)
	v, vd := consume.Handle(context.Background(), c, delivery("m", 2), e.fn("w", nil))
	check(t, vd, consume.Ack, idem.Replayed)
	if v != "v" {
		t.Fatalf("replayed %q, want v", v)
	}
	e.want(t, 1)
}
