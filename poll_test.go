package idem_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// Polling, where nothing pushes: a waiter on a key held by another
// instance, over a store that cannot wake it (no store.Waker), checks the
// key again after 10ms, then at doubling waits up to Options.PollInterval.

// plainStore is a store of a user's own: the methods of store.Store and
// nothing else (no Inspector, Scanner, Waker, Batcher or InProcess).
type plainStore struct{ s store.Store }

func (p plainStore) Claim(ctx context.Context, key string, req store.ClaimRequest) (store.ClaimResult, error) {
	return p.s.Claim(ctx, key, req)
}

func (p plainStore) Complete(ctx context.Context, key string, tok store.Token, rec store.Record, ttl time.Duration) (store.Record, error) {
	return p.s.Complete(ctx, key, tok, rec, ttl)
}

func (p plainStore) Release(ctx context.Context, key string, tok store.Token) error {
	return p.s.Release(ctx, key, tok)
}

func (p plainStore) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	return p.s.Renew(ctx, key, tok, lease)
}

func (p plainStore) Get(ctx context.Context, key string) (store.Record, error) {
	return p.s.Get(ctx, key)
}

func (p plainStore) Forget(ctx context.Context, key string) error { return p.s.Forget(ctx, key) }

// countingStore is a plainStore that counts its claims.
type countingStore struct {
	plainStore
	claims atomic.Int32
}

func (c *countingStore) Claim(ctx context.Context, key string, req store.ClaimRequest) (store.ClaimResult, error) {
	c.claims.Add(1)
	return c.plainStore.Claim(ctx, key, req)
}

// untilArmed waits until clk has one timer: the waiter's re-claim (the
// waiter has no settle timer, and its runtime holds no other key).
func untilArmed(t *testing.T, clk *clock.Fake) {
	t.Helper()
	idemtest.Eventually(t, "the re-claim timer", func() bool { return clk.Timers() == 1 })
}

func TestPollInterval(t *testing.T) {
	for _, c := range []struct {
		name string
		set  time.Duration // Options.PollInterval
		want time.Duration // the longest wait
	}{{"default", 0, 100 * time.Millisecond}, {"400ms", 400 * time.Millisecond, 400 * time.Millisecond}} {
		t.Run(c.name, func(t *testing.T) {
			mem := memstore.New(memstore.Options{Clock: idemtest.FakeClock()})
			holder := idemtest.Runtime(t, idem.Options{Store: plainStore{mem}, Clock: idemtest.FakeClock()})
			clk := idemtest.FakeClock() // the waiter's: only its re-claims are timed by it
			st := &countingStore{plainStore: plainStore{mem}}
			waiter := idemtest.Runtime(t, idem.Options{Store: st, Clock: clk, Shards: 1, PollInterval: c.set})

			g := idemtest.NewGate()
			owner := idemtest.GoDo(bg, holder, "k", g.Fn("v", nil))
			<-g.Started
			// The settle time (the longest: 100 years) ends long after
			// the test: the waiter's first timer is its re-claim.
			dup := idemtest.GoDo(bg, waiter, "k", idemtest.MustNotRun(t), idem.WithSettle(store.MaxDuration))
			untilArmed(t, clk)
			if n := st.claims.Load(); n != 1 {
				t.Fatalf("%d claims, want 1", n)
			}
			// The first check comes after 10ms.
			clk.Advance(10*time.Millisecond - time.Nanosecond)
			if n := st.claims.Load(); n != 1 {
				t.Fatalf("a re-claim before 10ms (%d claims)", n)
			}
			clk.Advance(time.Nanosecond)
			idemtest.Eventually(t, "the first re-claim", func() bool { return st.claims.Load() == 2 })
			// The waits double up to the poll interval. The clock moves to
			// each check exactly: past it, the check after could come
			// within the same move.
			for wait := 20 * time.Millisecond; wait < 4*c.want; wait *= 2 {
				untilArmed(t, clk)
				n := st.claims.Load()
				clk.Advance(min(wait, c.want))
				idemtest.Eventually(t, "a re-claim", func() bool { return st.claims.Load() == n+1 })
			}
			untilArmed(t, clk)
			close(g.Open)
			if r := idemtest.Recv(t, owner); r.Err != nil {
				t.Fatal(r.Err)
			}
			// The holder has settled; nothing wakes the waiter but its next
			// check, c.want after the last one.
			clk.Advance(c.want - time.Nanosecond)
			if len(dup) != 0 || clk.Timers() != 1 {
				t.Fatalf("the waiter checked again before the poll interval")
			}
			clk.Advance(time.Nanosecond)
			if r := idemtest.Recv(t, dup); r.Err != nil || r.V != "v" || r.Out != idem.Joined {
				t.Fatalf("the waiter: %+v, want the holder's result, joined", r)
			}
		})
	}
}

// The wait never goes past the end of the holder's lease: a waiter on a
// key whose holder died takes it over 1ms after its lease ends, though its
// doubling waits have grown past that.
func TestPollIntervalStopsAtLeaseEnd(t *testing.T) {
	clk := idemtest.FakeClock()
	mem := memstore.New(memstore.Options{Clock: clk})
	rt := idemtest.Runtime(t, idem.Options{Store: plainStore{mem}, Clock: clk, Shards: 1, PollInterval: time.Hour})
	if _, err := mem.Claim(bg, "k", store.ClaimRequest{Owner: "dead", Lease: time.Minute, TTL: time.Hour}); err != nil {
		t.Fatal(err)
	}
	ch := idemtest.GoDo(bg, rt, "k", idemtest.Value("taken over"), idem.WithSettle(store.MaxDuration))
	// Checks at 10ms, 30ms, 70ms, ... 40.95s: the next wait would be 40.96s.
	wait := 10 * time.Millisecond
	for range 12 {
		untilArmed(t, clk)
		clk.Advance(wait)
		wait *= 2
	}
	untilArmed(t, clk)
	clk.Advance(19*time.Second + 51*time.Millisecond - time.Nanosecond) // to the lease end, plus 1ms
	if len(ch) != 0 || clk.Timers() != 1 {
		t.Fatal("the waiter checked again before the lease end")
	}
	clk.Advance(time.Nanosecond)
	if r := idemtest.Recv(t, ch); r.Err != nil || r.V != "taken over" || r.Out != idem.Executed {
		t.Fatalf("the waiter: %+v, want a takeover", r)
	}
}

// A poll interval below 1ms is refused: a waiter would read the store
// back to back (1ns made one waiting call claim thousands of times in a
// few milliseconds).
func TestPollIntervalRefused(t *testing.T) {
	for _, d := range []time.Duration{-time.Millisecond, time.Nanosecond, time.Millisecond - time.Nanosecond} {
		if _, err := idem.New(idem.Options{PollInterval: d}); !errors.Is(err, idem.ErrInvalidArgument) || !strings.Contains(err.Error(), "PollInterval") {
			t.Errorf("PollInterval %v: %v, want ErrInvalidArgument naming the field", d, err)
		}
	}
	idemtest.Runtime(t, idem.Options{PollInterval: time.Millisecond}) // the floor itself is fine
}
