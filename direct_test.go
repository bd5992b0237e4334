package idem_test

// Direct owners (actors/direct.go) through the public API: regression
// tests of the faults an adversarial review of the first version found
// (each failed on it). The comments say what went wrong then.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// promoteAll removes each listed owner from the list before it knows what
// it will do with it: an owner whose claimHere sets dRunning between
// promoteAll's two CASes (Running->Announced fails, it is still dClaiming;
// Claiming->Refused fails, it is dRunning now) is neither announced nor
// refused, and no longer listed. Close then neither stops it nor waits for
// it: its function runs on after Close returned, with a context Close never
// cancels.
func TestCloseStopsEveryDirectOwner(t *testing.T) {
	deadline := time.Now().Add(3 * time.Second)
	var escaped, iters int
	for time.Now().Before(deadline) && escaped == 0 {
		iters++
		escaped = closeRaceOnce(t, iters)
	}
	if escaped > 0 {
		t.Fatalf("iteration %d: %d function(s) were still running after Close returned, never stopped by it", iters, escaped)
	}
	t.Logf("%d iterations, not hit", iters)
}

func closeRaceOnce(t *testing.T, iter int) int {
	rt, err := idem.New(idem.Options{Store: memstore.New(memstore.Options{}), Shards: 2})
	if err != nil {
		t.Fatal(err)
	}
	escape := make(chan struct{})
	var notStopped, started atomic.Int32
	fn := func(ctx context.Context) (string, error) {
		started.Add(1)
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-escape:
			notStopped.Add(1)
			return "escaped", nil
		}
	}
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := idem.Do(context.Background(), rt, fmt.Sprintf("k-%d-%d-%d", iter, g, i), fn)
				if errors.Is(err, idem.ErrClosed) {
					return
				}
			}
		}(g)
	}
	for started.Load() < 4 {
		time.Sleep(10 * time.Microsecond)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	cerr := rt.Close(ctx)
	cancel()
	close(stop)
	// Close returned: every function it knew of was stopped and is over.
	time.Sleep(2 * time.Millisecond)
	close(escape)
	wg.Wait()
	if cerr != nil {
		t.Fatalf("Close: %v", cerr)
	}
	return int(notStopped.Load())
}

// forgetHooked is memstore (in process, owners complete: the direct path)
// with a hook that runs before each Forget.
type forgetHooked struct {
	*memstore.Store
	before func(key string)
}

func (s *forgetHooked) Forget(ctx context.Context, key string) error {
	if s.before != nil {
		s.before(key)
	}
	return s.Store.Forget(ctx, key)
}

// Clear promises that a key this runtime has a run of in flight is
// skipped and its result kept (see Runtime.Clear). A direct owner has no
// entry on its shard, so onClear lets its key through as not busy; if the
// run completes before the page's Forget reaches the store (the store
// refuses a Forget only while the claim is in progress), the result of a
// run that was in flight when Clear asked the shard is deleted, and the
// next call of the key runs the function again.
func TestClearKeepsTheResultOfADirectRunInFlight(t *testing.T) {
	ctx := context.Background()
	ms := memstore.New(memstore.Options{})
	hs := &forgetHooked{Store: ms}
	rt, err := idem.New(idem.Options{Store: hs, CacheEntries: 16})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close(ctx)
	const key = "in-flight"
	var runs atomic.Int32
	release := make(chan struct{})
	running := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := idem.Do(ctx, rt, key, func(context.Context) (string, error) {
			runs.Add(1)
			close(running)
			<-release
			return "v", nil
		})
		done <- err
	}()
	<-running
	var once sync.Once
	hs.before = func(k string) {
		if k != key {
			return
		}
		// The run ends while Clear deletes its page.
		once.Do(func() { close(release); <-done; done <- nil })
	}
	res, err := rt.Clear(ctx, store0(), idem.ClearOptions{All: true})
	once.Do(func() { close(release) })
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idem.Do(ctx, rt, key, func(context.Context) (string, error) { runs.Add(1); return "again", nil }); err != nil {
		t.Fatal(err)
	}
	if res.Skipped != 1 || res.Deleted != 0 || runs.Load() != 1 {
		t.Fatalf("Clear of a key with a run in flight: %+v, and the function ran %d times; want it skipped, its result kept, one run",
			res, runs.Load())
	}
}

func store0() store.Scope { return store.Scope{} }

// A run under a hard lease (WithoutRenewal) that outlives it is stopped
// when the next caller of the key takes it over: the shard parks that
// caller, letGo cancels the old run, and only then claims (a takeover).
// With the direct path, the old owner has been announced (the promotion
// timer), so its key's busy slot is free; the next caller claims the key
// in the store on its own goroutine, the store lets it take the key over,
// and it runs at once while the old run goes on, never told to stop: the
// new run ends well within promoteAfter, finishHere caches its result, and
// the shard, which still has the old owner as the key's running owner,
// never hears of it.
func TestTakeoverStopsTheOldRunFirst(t *testing.T) {
	clk := idemtest.FakeClock()
	rt := idemtest.Runtime(t, idem.Options{Store: memstore.New(memstore.Options{Clock: clk}), Clock: clk})
	opts := []idem.CallOption{idem.WithLease(time.Second), idem.WithoutRenewal()}
	aCtx := make(chan context.Context, 1)
	escape := make(chan struct{})
	ownerA := idemtest.GoDo(context.Background(), rt, "k", func(ctx context.Context) (string, error) {
		aCtx <- ctx
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-escape:
			return "A", nil
		}
	}, opts...)
	ctxA := idemtest.Recv(t, aCtx)
	clk.Advance(1500 * time.Millisecond) // A's hard lease is over
	var aStoppedWhenBRan bool
	b, err := idem.Do(context.Background(), rt, "k", func(context.Context) (string, error) {
		aStoppedWhenBRan = ctxA.Err() != nil
		return "B", nil
	}, opts...)
	if err != nil || b != "B" {
		t.Fatalf("B: %q, %v", b, err)
	}
	time.Sleep(300 * time.Millisecond) // real time: anything the shard still does
	aStopped := ctxA.Err() != nil
	close(escape)
	r := idemtest.Recv(t, ownerA)
	if !aStoppedWhenBRan || !aStopped {
		t.Fatalf("A's context cancelled when B ran: %v, 300ms after B returned: %v (A then returned %+v); "+
			"want A stopped before B took its key over", aStoppedWhenBRan, aStopped, r)
	}
}

// Stats.InFlight counts keys with callers in flight: a direct owner's key
// once, while it runs alone (the shard has not heard of it), while a
// second caller waits behind it (the shard adopted it), and never after.
func TestStatsCountADirectOwnersKeyOnce(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{Store: memstore.New(memstore.Options{}), Shards: 1})
	release := make(chan struct{})
	running := make(chan struct{})
	a := idemtest.GoDo(context.Background(), rt, "k", func(context.Context) (string, error) {
		close(running)
		<-release
		return "A", nil
	})
	<-running
	if n := rt.Stats().InFlight; n != 1 {
		t.Fatalf("Stats().InFlight = %d with one key's run in flight, want 1", n)
	}
	b := idemtest.GoDo(context.Background(), rt, "k", idemtest.MustNotRun(t))
	waitersAre(t, rt, 1)
	if n := rt.Stats().InFlight; n != 1 {
		t.Fatalf("Stats().InFlight = %d with one key in flight and a caller waiting, want 1", n)
	}
	close(release)
	idemtest.Recv(t, a)
	if r := idemtest.Recv(t, b); r.Err != nil || r.V != "A" || r.Out != idem.Joined {
		t.Fatalf("the waiter: %+v, want A's value, joined", r)
	}
	idemtest.Eventually(t, "no key in flight", func() bool { return rt.Stats().InFlight == 0 })
}

type reviewErr struct{ code int }

func (e *reviewErr) Error() string { return fmt.Sprintf("review error %d", e.code) }

// An owner's result is kept in the LRU, so that this process replays the
// owner's value and its error themselves (Get: "the original in the
// owner's process while it is cached"). A direct owner caches its result
// only if no LRU drop began on its shard since its claim (cacheDirect):
// a Forget of any other key of the shard (or a DropCached, a Clear page,
// an invalidation) while it runs leaves its result out of the LRU, so the
// next call replays a *ReplayedError from the store instead of the
// original error. The shard's own path (remember) skips only the keys
// being dropped (entry.noCache).
func TestForgetOfAnotherKeyLeavesADirectResultCached(t *testing.T) {
	ctx := context.Background()
	rt := idemtest.Runtime(t, idem.Options{Store: memstore.New(memstore.Options{}), Shards: 1, CacheEntries: 16})
	release := make(chan struct{})
	running := make(chan struct{})
	a := idemtest.GoDo(ctx, rt, "k", func(context.Context) (string, error) {
		close(running)
		<-release
		return "", idem.Permanent(&reviewErr{code: 7})
	})
	<-running
	if err := rt.Forget(ctx, "some-other-key"); err != nil {
		t.Fatal(err)
	}
	close(release)
	var re *reviewErr
	if r := idemtest.Recv(t, a); !errors.As(r.Err, &re) {
		t.Fatalf("owner: %v", r.Err)
	}
	_, err := idem.Do(ctx, rt, "k", idemtest.MustNotRun(t))
	if !errors.As(err, &re) {
		t.Fatalf("replay in the owner's process: %v (%T), want the original *reviewErr; cache entries: %d",
			err, err, rt.Stats().CacheEntries)
	}
}

// On a fake clock a renewal due while the clock moves is sent as the
// clock reaches it: the shard arms it at the grant. A direct owner's
// renewal is armed only when the shard adopts it, after the promotion
// timer fired inside the Advance; by then the Advance is over, the
// renewal's deadline (preAt + lease/3) is behind the clock, and a fake
// timer armed for the past waits for the next Advance. One Advance past
// the first renewal leaves the lease unrenewed.
func TestDirectOwnerRenewedWithoutAnotherAdvance(t *testing.T) {
	clk := idemtest.FakeClock()
	ms := memstore.New(memstore.Options{Clock: clk})
	rt := idemtest.Runtime(t, idem.Options{Store: ms, Clock: clk})
	release := make(chan struct{})
	running := make(chan struct{})
	a := idemtest.GoDo(context.Background(), rt, "k", func(context.Context) (string, error) {
		close(running)
		<-release
		return "A", nil
	}, idem.WithLease(time.Second))
	<-running
	clk.Advance(400 * time.Millisecond) // the first renewal was due at 333ms
	renewed := false
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end) && !renewed; time.Sleep(5 * time.Millisecond) {
		e, err := ms.Inspect(context.Background(), "k")
		if err != nil {
			t.Fatal(err)
		}
		renewed = e.LeaseLeft > 600*time.Millisecond
	}
	close(release)
	idemtest.Recv(t, a)
	if !renewed {
		t.Fatal("the lease of a run was not renewed 2s (real time) after the clock passed its renewal")
	}
}
