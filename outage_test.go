package idem_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

// A store outage longer than the lease, on a fake clock: fn returns while
// the store is away, the runtime keeps its result and offers it until the
// store is back, and the key runs once.

// errStoreDown is what a store that cannot be reached answers: a failure
// of the store itself, so store.Retryable holds.
var errStoreDown = errors.New("dial tcp 127.0.0.1:6379: connect: connection refused")

// downStore wraps a store and can take it away: while down, every
// operation fails with errStoreDown without reaching the store; while hung,
// every operation waits until the store is up again, then runs (as on a
// server that was paused). It counts the operations of each kind that it
// turned away or held.
type downStore struct {
	store.Store

	mu     sync.Mutex
	down   bool
	hung   chan struct{} // closed when the store is up again; nil when not hung
	missed map[store.OpKind]int
}

// downInline is a downStore the runtime treats as the in-process store it
// wraps: operations run on the shards and owners complete their keys
// themselves, as with memstore.
type downInline struct{ *downStore }

func (downInline) InProcess()      {}
func (downInline) OwnerCompletes() {}

var (
	_ store.InProcess      = downInline{}
	_ store.OwnerCompleter = downInline{}
)

func newDownStore(s store.Store) *downStore {
	return &downStore{Store: s, missed: map[store.OpKind]int{}}
}

// setDown takes the store away (failing every operation) or brings it back.
func (d *downStore) setDown(down bool) {
	d.mu.Lock()
	d.down = down
	d.mu.Unlock()
}

// hang makes every operation wait until up is called.
func (d *downStore) hang() {
	d.mu.Lock()
	d.hung = make(chan struct{})
	d.mu.Unlock()
}

// up ends a hang: the held operations run.
func (d *downStore) up() {
	d.mu.Lock()
	if d.hung != nil {
		close(d.hung)
		d.hung = nil
	}
	d.mu.Unlock()
}

// count returns how many operations of kind were turned away or held.
func (d *downStore) count(kind store.OpKind) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.missed[kind]
}

// gate is where every operation passes: it reports errStoreDown while the
// store is down, and waits while it is hung.
func (d *downStore) gate(kind store.OpKind) error {
	d.mu.Lock()
	down, hung := d.down, d.hung
	if down || hung != nil {
		d.missed[kind]++
	}
	d.mu.Unlock()
	if hung != nil {
		<-hung
	}
	if down {
		return errStoreDown
	}
	return nil
}

func (d *downStore) Claim(ctx context.Context, key string, req store.ClaimRequest) (store.ClaimResult, error) {
	if err := d.gate(store.OpClaim); err != nil {
		return store.ClaimResult{}, err
	}
	return d.Store.Claim(ctx, key, req)
}

func (d *downStore) Complete(ctx context.Context, key string, tok store.Token, rec store.Record, ttl time.Duration) (store.Record, error) {
	if err := d.gate(store.OpComplete); err != nil {
		return store.Record{}, err
	}
	return d.Store.Complete(ctx, key, tok, rec, ttl)
}

func (d *downStore) Release(ctx context.Context, key string, tok store.Token) error {
	if err := d.gate(store.OpRelease); err != nil {
		return err
	}
	return d.Store.Release(ctx, key, tok)
}

func (d *downStore) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	if err := d.gate(store.OpRenew); err != nil {
		return err
	}
	return d.Store.Renew(ctx, key, tok, lease)
}

func (d *downStore) Get(ctx context.Context, key string) (store.Record, error) {
	if err := d.gate(store.OpGet); err != nil {
		return store.Record{}, err
	}
	return d.Store.Get(ctx, key)
}

func (d *downStore) Forget(ctx context.Context, key string) error {
	if err := d.gate(store.OpForget); err != nil {
		return err
	}
	return d.Store.Forget(ctx, key)
}

// outageFn is a function under the test's control: it hands the test its
// context as it starts, then returns what the test sends it, whatever its
// context says (a function whose side effect is already done).
type outageFn struct {
	runs    atomic.Int32
	started chan context.Context
	ret     chan string
}

func newOutageFn(t testing.TB) *outageFn {
	f := &outageFn{started: make(chan context.Context, 4), ret: make(chan string, 1)}
	t.Cleanup(func() {
		select {
		case f.ret <- "test over":
		default:
		}
	})
	return f
}

func (f *outageFn) fn(ctx context.Context) (string, error) {
	f.runs.Add(1)
	f.started <- ctx
	return <-f.ret, nil
}

// The store fails every operation, as a server that refuses connections,
// from just after the claim until long after the lease ended. The failed
// renewals stop fn (its context is cancelled with ErrLeaseLost once the
// lease may have ended, never before), but fn returns a result anyway; the
// owner is told the store did not take it; the result is kept and offered
// again past the lease until the store is back; it is stored then, the
// caller that waited meanwhile and every later caller get it, and fn ran
// once.
func TestCompleteOutlastsAnOutage(t *testing.T) {
	const lease = 3 * time.Second
	for _, inline := range []bool{true, false} {
		name := map[bool]string{true: "inline", false: "batched"}[inline]
		t.Run(name, func(t *testing.T) {
			clk := idemtest.FakeClock()
			mem := memStore(clk)
			ds := newDownStore(mem)
			var s store.Store = ds
			if inline {
				s = downInline{ds}
			}
			rt := idemtest.Runtime(t, idem.Options{Store: s, Clock: clk,
				Policy: idem.Policy{Lease: lease, TTL: time.Hour, Settle: time.Hour}})
			f := newOutageFn(t)
			owner := idemtest.GoDo(bg, rt, "k", f.fn)
			ctx := idemtest.Recv(t, f.started)
			// The first renewal, a third of the lease in, is the shard's
			// only timer; the store goes away before it.
			idemtest.Eventually(t, "the first renewal armed", func() bool { return clk.Timers() == 1 })
			ds.setDown(true)

			// Renewals fail; within the lease, fn goes on undisturbed.
			idemtest.Eventually(t, "two failed renewals", func() bool {
				if ds.count(store.OpRenew) >= 2 {
					return true
				}
				if clk.Now().Before(idemtest.Epoch.Add(lease - 100*time.Millisecond)) {
					clk.Advance(100 * time.Millisecond)
				}
				return false
			})
			if ctx.Err() != nil {
				t.Fatalf("fn's context ended within the lease: %v", context.Cause(ctx))
			}
			// The lease may have ended: the next failed renewal stops fn.
			idemtest.Eventually(t, "fn told to stop", func() bool {
				if ctx.Err() != nil {
					return true
				}
				clk.Advance(100 * time.Millisecond)
				return false
			})
			if !errors.Is(context.Cause(ctx), idem.ErrLeaseLost) {
				t.Fatalf("fn's context ended with %v, want ErrLeaseLost", context.Cause(ctx))
			}
			if clk.Now().Before(idemtest.Epoch.Add(lease)) {
				t.Fatalf("fn told to stop at %v, within its lease of %v", clk.Now().Sub(idemtest.Epoch), lease)
			}

			// fn's side effect is done: it returns its result while the
			// store is still away. The owner learns that it is not stored.
			f.ret <- "A"
			if r := idemtest.Recv(t, owner); !errors.Is(r.Err, idem.ErrStoreUnavailable) {
				t.Fatalf("owner: %+v, want ErrStoreUnavailable", r)
			}
			// A retry of the call waits for the result being stored.
			retry := idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t))
			waitersAre(t, rt, 1)
			// The result is offered again, well past the lease.
			idemtest.Eventually(t, "Complete retried past the lease", func() bool {
				if ds.count(store.OpComplete) >= 5 && clk.Now().After(idemtest.Epoch.Add(3*lease)) {
					return true
				}
				clk.Advance(100 * time.Millisecond)
				return false
			})

			ds.setDown(false)
			stepUntilAnswered(t, clk, 100*time.Millisecond, retry)
			if r := idemtest.Recv(t, retry); r.Err != nil || r.V != "A" || r.Out != idem.Joined {
				t.Fatalf("the retry that waited: %+v, want A joined", r)
			}
			if v, out, err := doOutcome(rt, "k", idemtest.MustNotRun(t)); err != nil || v != "A" || out != idem.Replayed {
				t.Fatalf("a later call: %q %v %v, want A replayed", v, out, err)
			}
			rec, err := mem.Get(bg, "k")
			if err != nil || string(rec.Value) != `"A"` {
				t.Fatalf("the store holds %q, %v", rec.Value, err)
			}
			// Another instance on the same store replays it too.
			other := idemtest.Runtime(t, idem.Options{Store: mem, Clock: clk})
			if v, out, err := doOutcome(other, "k", idemtest.MustNotRun(t)); err != nil || v != "A" || out != idem.Replayed {
				t.Fatalf("another runtime: %q %v %v, want A replayed", v, out, err)
			}
			if n := f.runs.Load(); n != 1 {
				t.Fatalf("fn ran %d times, want once", n)
			}
		})
	}
}

// doOutcome calls Do and returns its outcome too.
func doOutcome(rt *idem.Runtime, key string, fn func(context.Context) (string, error)) (string, idem.Outcome, error) {
	var out idem.Outcome
	v, err := idem.Do(bg, rt, key, fn, idem.WithOutcome(&out))
	return v, out, err
}

// The store hangs instead of failing (a paused server whose client waits
// for its reply): a renewal sent before the lease ended has no answer when
// the lease ends. fn is told to stop then, by the local clock, not when the
// renewal's answer comes back; its result is still stored once the store
// answers, and the key runs once.
func TestRenewalHangsPastTheLease(t *testing.T) {
	const lease = 3 * time.Second
	clk := idemtest.FakeClock()
	mem := memStore(clk)
	ds := newDownStore(mem)
	rt := idemtest.Runtime(t, idem.Options{Store: ds, Clock: clk,
		Policy: idem.Policy{Lease: lease, TTL: time.Hour, Settle: time.Hour}})
	f := newOutageFn(t)
	owner := idemtest.GoDo(bg, rt, "k", f.fn)
	ctx := idemtest.Recv(t, f.started)
	idemtest.Eventually(t, "the first renewal armed", func() bool { return clk.Timers() == 1 })
	ds.hang()
	t.Cleanup(ds.up) // before the runtime's Close, which waits for the batch
	clk.Advance(lease / 3)
	idemtest.Eventually(t, "the renewal held", func() bool { return ds.count(store.OpRenew) == 1 })
	// Nothing answers; the lease ends by the local clock.
	idemtest.Eventually(t, "fn told to stop", func() bool {
		if ctx.Err() != nil {
			return true
		}
		if clk.Now().Before(idemtest.Epoch.Add(2 * lease)) {
			clk.Advance(100 * time.Millisecond)
		}
		return false
	})
	if !errors.Is(context.Cause(ctx), idem.ErrLeaseLost) {
		t.Fatalf("fn's context ended with %v, want ErrLeaseLost", context.Cause(ctx))
	}
	if clk.Now().Before(idemtest.Epoch.Add(lease)) {
		t.Fatalf("fn told to stop at %v, within its lease of %v", clk.Now().Sub(idemtest.Epoch), lease)
	}
	f.ret <- "A"
	retry := idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t))
	waitersAre(t, rt, 1)
	clk.Advance(10 * lease)
	ds.up()
	stepUntilAnswered(t, clk, 100*time.Millisecond, owner)
	if r := idemtest.Recv(t, owner); r.Err != nil || r.V != "A" {
		t.Fatalf("owner: %+v, want A stored", r)
	}
	if r := idemtest.Recv(t, retry); r.Err != nil || r.V != "A" || r.Out != idem.Joined {
		t.Fatalf("the retry that waited: %+v, want A joined", r)
	}
	if v, out, err := doOutcome(rt, "k", idemtest.MustNotRun(t)); err != nil || v != "A" || out != idem.Replayed {
		t.Fatalf("a later call: %q %v %v, want A replayed", v, out, err)
	}
	if n := f.runs.Load(); n != 1 {
		t.Fatalf("fn ran %d times, want once", n)
	}
}

// An fn that stops when its context says the lease may have ended returns
// no result: nothing is stored, its owner gets the error (which says
// ErrLeaseLost), a caller waiting for it gets ErrStoreUnavailable while the
// store is away, and the next call once the store is back runs fn again.
func TestOutageStopsAnObedientFunction(t *testing.T) {
	const lease = 3 * time.Second
	clk := idemtest.FakeClock()
	ds := newDownStore(memStore(clk))
	rt := idemtest.Runtime(t, idem.Options{Store: ds, Clock: clk,
		Policy: idem.Policy{Lease: lease, TTL: time.Hour, Settle: time.Hour}})
	var runs atomic.Int32
	started := make(chan struct{}, 1)
	owner := idemtest.GoDo(bg, rt, "k", func(ctx context.Context) (string, error) {
		runs.Add(1)
		started <- struct{}{}
		<-ctx.Done()
		return "", ctx.Err()
	})
	idemtest.Recv(t, started)
	idemtest.Eventually(t, "the first renewal armed", func() bool { return clk.Timers() == 1 })
	ds.setDown(true)
	waiter := idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t))
	waitersAre(t, rt, 1)
	stepUntilAnswered(t, clk, 100*time.Millisecond, owner)
	if r := idemtest.Recv(t, owner); !errors.Is(r.Err, idem.ErrLeaseLost) || !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("owner: %+v, want its context's error, saying ErrLeaseLost", r)
	}
	if r := idemtest.Recv(t, waiter); !errors.Is(r.Err, idem.ErrStoreUnavailable) {
		t.Fatalf("waiter: %+v, want ErrStoreUnavailable", r)
	}
	ds.setDown(false)
	if v, out, err := doOutcome(rt, "k", idemtest.Value("B")); err != nil || v != "B" || out != idem.Executed {
		t.Fatalf("once the store is back: %q %v %v, want a new run", v, out, err)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("the obedient fn ran %d times, want once", n)
	}
}
