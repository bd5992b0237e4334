package idem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store"
)

// N callers of one key: fn runs once, all get its value, one executed and
// the others joined.
func TestStormRunsOnce(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		rt := newRuntime(t, idem.Options{Store: wrap(memStore(nil))})
		const n = 200
		g := newGate()
		chans := make([]<-chan result, n)
		for i := range chans {
			chans[i] = goDo(bg, rt, "storm", g.fn("charged", nil))
		}
		<-g.started
		waitersAre(t, rt, n-1)
		close(g.open)
		counts := map[idem.Outcome]int{}
		for _, ch := range chans {
			r := recv(t, ch)
			if r.err != nil || r.v != "charged" {
				t.Fatalf("caller got %q, %v", r.v, r.err)
			}
			counts[r.out]++
		}
		if g.Runs() != 1 || counts[idem.Executed] != 1 || counts[idem.Joined] != n-1 {
			t.Fatalf("runs %d, outcomes %v; want 1 run, 1 executed, %d joined", g.Runs(), counts, n-1)
		}
		if st := rt.Stats(); st.InFlight != 0 || st.Waiters != 0 || st.Pending != 0 {
			t.Fatalf("stats after the storm: %+v", st)
		}
	})
}

// Many goroutines on overlapping keys: every key runs exactly once.
func TestOverlappingKeysRunOnce(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		rt := newRuntime(t, idem.Options{Store: wrap(memStore(nil)), CacheEntries: 16})
		const keys, callers = 300, 16
		var runs [keys]atomic.Int32
		var wg sync.WaitGroup
		for c := range callers {
			wg.Go(func() {
				for i := range keys {
					k := (i + c*7) % keys
					v, err := idem.Do(bg, rt, fmt.Sprint("key-", k), func(context.Context) (int, error) {
						runs[k].Add(1)
						return k, nil
					})
					if err != nil || v != k {
						t.Errorf("key %d: %v, %v", k, v, err)
					}
				}
			})
		}
		wg.Wait()
		for k := range runs {
			if n := runs[k].Load(); n != 1 {
				t.Fatalf("key %d ran %d times", k, n)
			}
		}
	})
}

func TestLaterCallsReplay(t *testing.T) {
	for _, disable := range []bool{false, true} {
		t.Run(fmt.Sprint("cache disabled=", disable), func(t *testing.T) {
			rt := newRuntime(t, idem.Options{DisableCache: disable})
			if _, err := idem.Do(bg, rt, "k", value("first")); err != nil {
				t.Fatal(err)
			}
			var out idem.Outcome
			v, err := idem.Do(bg, rt, "k", mustNotRun(t), idem.WithOutcome(&out))
			if err != nil || v != "first" || out != idem.Replayed {
				t.Fatalf("replay = %q, %v, %v", v, err, out)
			}
		})
	}
}

func TestSettleZeroFailsFast(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		rt := newRuntime(t, idem.Options{Store: wrap(memStore(nil)), Lease: time.Minute})
		g := newGate()
		owner := goDo(bg, rt, "k", g.fn("v", nil))
		<-g.started
		_, err := idem.Do(bg, rt, "k", mustNotRun(t), idem.WithSettle(0))
		var ce *idem.ConflictError
		if !errors.Is(err, idem.ErrConflict) || !errors.As(err, &ce) {
			t.Fatalf("err = %v, want a *ConflictError", err)
		}
		if ce.Key != "k" || ce.State != "in-progress" || ce.LeaseLeft <= 0 || ce.LeaseLeft > time.Minute {
			t.Fatalf("conflict details %+v", ce)
		}
		close(g.open)
		if r := recv(t, owner); r.err != nil || r.out != idem.Executed {
			t.Fatalf("owner: %+v", r)
		}
	})
}

// A waiter whose settle time runs out gets ErrConflict; the owner and the
// other waiters are not disturbed.
func TestSettleTimeoutLeavesEntry(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		clk := fakeClock()
		rt := newRuntime(t, idem.Options{Store: wrap(memStore(clk)), Clock: clk})
		g := newGate()
		var ownerCtx context.Context
		owner := goDo(bg, rt, "k", func(ctx context.Context) (string, error) {
			ownerCtx = ctx
			return g.fn("v", nil)(ctx)
		})
		<-g.started
		short := goDo(bg, rt, "k", mustNotRun(t), idem.WithSettle(time.Second))
		patient := goDo(bg, rt, "k", mustNotRun(t))
		waitersAre(t, rt, 2)
		clk.Advance(time.Second)
		r := recv(t, short)
		if !errors.Is(r.err, idem.ErrConflict) {
			t.Fatalf("short waiter: %+v, want ErrConflict", r)
		}
		waitersAre(t, rt, 1)
		if ownerCtx.Err() != nil {
			t.Fatal("a waiter's timeout cancelled the owner")
		}
		close(g.open)
		if r := recv(t, patient); r.err != nil || r.v != "v" || r.out != idem.Joined {
			t.Fatalf("patient waiter: %+v", r)
		}
		if r := recv(t, owner); r.err != nil || r.v != "v" {
			t.Fatalf("owner: %+v", r)
		}
	})
}

// A waiter whose context ends leaves; the owner goes on and the others get
// the result.
func TestWaiterCancelOnlyLeaves(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		rt := newRuntime(t, idem.Options{Store: wrap(memStore(nil))})
		g := newGate()
		owner := goDo(bg, rt, "k", g.fn("v", nil))
		<-g.started
		ctx, cancel := context.WithCancel(bg)
		leaver := goDo(ctx, rt, "k", mustNotRun(t))
		stayer := goDo(bg, rt, "k", mustNotRun(t))
		waitersAre(t, rt, 2)
		cancel()
		if r := recv(t, leaver); !errors.Is(r.err, context.Canceled) {
			t.Fatalf("cancelled waiter: %+v", r)
		}
		waitersAre(t, rt, 1)
		close(g.open)
		if r := recv(t, stayer); r.err != nil || r.v != "v" {
			t.Fatalf("other waiter: %+v", r)
		}
		if r := recv(t, owner); r.err != nil {
			t.Fatalf("owner: %+v", r)
		}
	})
}

// An owner whose context is cancelled returns at once; its function goes on
// (under a context that is not cancelled) and its result is stored.
func TestOwnerCancelKeepsWork(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		rt := newRuntime(t, idem.Options{Store: wrap(memStore(nil))})
		g := newGate()
		var fnCtx context.Context
		ctx, cancel := context.WithCancel(context.WithValue(bg, ctxKey{}, "carried"))
		owner := goDo(ctx, rt, "k", func(c context.Context) (string, error) {
			fnCtx = c
			return g.fn("v", nil)(c)
		})
		<-g.started
		waiter := goDo(bg, rt, "k", mustNotRun(t))
		waitersAre(t, rt, 1)
		cancel()
		if r := recv(t, owner); !errors.Is(r.err, context.Canceled) || r.out != idem.Executed {
			t.Fatalf("cancelled owner: %+v", r)
		}
		if fnCtx.Err() != nil || fnCtx.Value(ctxKey{}) != "carried" {
			t.Fatalf("fn context: err %v value %v; want not cancelled, values kept", fnCtx.Err(), fnCtx.Value(ctxKey{}))
		}
		close(g.open)
		if r := recv(t, waiter); r.err != nil || r.v != "v" || r.out != idem.Joined {
			t.Fatalf("waiter: %+v", r)
		}
		v, err := idem.Do(bg, rt, "k", mustNotRun(t))
		if err != nil || v != "v" {
			t.Fatalf("later call: %q, %v", v, err)
		}
	})
}

type ctxKey struct{}

func TestOwnerDeadlineBoundsFunction(t *testing.T) {
	rt := newRuntime(t, idem.Options{})
	ctx, cancel := context.WithTimeout(bg, time.Hour)
	defer cancel()
	want, _ := ctx.Deadline()
	_, err := idem.Do(ctx, rt, "k", func(c context.Context) (string, error) {
		if got, ok := c.Deadline(); !ok || !got.Equal(want) {
			return "", fmt.Errorf("deadline %v %v, want %v", got, ok, want)
		}
		return "ok", nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

var errDeclined = errors.New("card declined")

func TestPermanentErrorReplayed(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		clk := fakeClock()
		rt := newRuntime(t, idem.Options{Store: wrap(memStore(clk)), Clock: clk})
		g := newGate()
		owner := goDo(bg, rt, "k", g.fn("", idem.Permanent(errDeclined)), idem.WithTTL(time.Hour))
		<-g.started
		waiter := goDo(bg, rt, "k", mustNotRun(t))
		waitersAre(t, rt, 1)
		close(g.open)
		for _, r := range []result{recv(t, owner), recv(t, waiter)} {
			if !errors.Is(r.err, errDeclined) || !idem.IsPermanent(r.err) {
				t.Fatalf("%v: err %v, want the permanent decline", r.out, r.err)
			}
		}
		var out idem.Outcome
		_, err := idem.Do(bg, rt, "k", mustNotRun(t), idem.WithOutcome(&out))
		if !errors.Is(err, errDeclined) || out != idem.Replayed {
			t.Fatalf("replay: %v %v", err, out)
		}
		clk.Advance(time.Hour)
		v, err := idem.Do(bg, rt, "k", value("retried"))
		if err != nil || v != "retried" {
			t.Fatalf("after the TTL: %q, %v; want a new run", v, err)
		}
	})
}

// From the store (another process, or after the cache), a permanent error
// comes back as a *ReplayedError with its message.
func TestPermanentErrorFromStore(t *testing.T) {
	st := memStore(nil)
	rt1 := newRuntime(t, idem.Options{Store: st})
	rt2 := newRuntime(t, idem.Options{Store: st})
	_, err := idem.Do(bg, rt1, "k", func(context.Context) (int, error) { return 0, idem.Permanent(errDeclined) })
	if !errors.Is(err, errDeclined) {
		t.Fatal(err)
	}
	_, err = idem.Do(bg, rt2, "k", func(context.Context) (int, error) { t.Error("ran"); return 0, nil })
	var re *idem.ReplayedError
	if !errors.As(err, &re) || re.Message != "card declined" || !idem.IsPermanent(err) || re.Key != "k" {
		t.Fatalf("err = %#v, want a *ReplayedError with the message", err)
	}
}

func TestClassifier(t *testing.T) {
	isDecline := func(err error) bool { return errors.Is(err, errDeclined) }
	rt := newRuntime(t, idem.Options{Classifier: isDecline})
	_, err := idem.Do(bg, rt, "a", value2("", errDeclined))
	_, err2 := idem.Do(bg, rt, "a", mustNotRun(t))
	if !errors.Is(err, errDeclined) || !errors.Is(err2, errDeclined) {
		t.Fatalf("Options.Permanent: %v, then %v", err, err2)
	}
	_, err = idem.Do(bg, rt, "b", value2("", errDeclined), idem.WithClassifier(func(error) bool { return false }))
	v, err2 := idem.Do(bg, rt, "b", value("ran again"))
	if !errors.Is(err, errDeclined) || err2 != nil || v != "ran again" {
		t.Fatalf("WithClassifier(false): %v, then %q %v", err, v, err2)
	}
}

func value2(v string, err error) func(context.Context) (string, error) {
	return func(context.Context) (string, error) { return v, err }
}

var errTransient = errors.New("connection reset")

// A transient failure stores nothing: the owner gets its error and exactly
// one waiter is handed the key and runs; the others get that run's result.
func TestTransientErrorHandsOff(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		rt := newRuntime(t, idem.Options{Store: wrap(memStore(nil))})
		var runs atomic.Int32
		first := make(chan struct{})
		release := make(chan struct{})
		fn := func(context.Context) (string, error) {
			if runs.Add(1) == 1 {
				close(first)
				<-release
				return "", errTransient
			}
			return "second run", nil
		}
		owner := goDo(bg, rt, "k", fn)
		<-first
		var waiters []<-chan result
		for range 5 {
			waiters = append(waiters, goDo(bg, rt, "k", fn))
		}
		waitersAre(t, rt, 5)
		close(release)
		if r := recv(t, owner); !errors.Is(r.err, errTransient) || r.out != idem.Executed {
			t.Fatalf("owner: %+v", r)
		}
		counts := map[idem.Outcome]int{}
		for _, ch := range waiters {
			r := recv(t, ch)
			if r.err != nil || r.v != "second run" {
				t.Fatalf("waiter: %+v", r)
			}
			counts[r.out]++
		}
		if runs.Load() != 2 || counts[idem.Executed] != 1 || counts[idem.Joined] != 4 {
			t.Fatalf("runs %d, outcomes %v; want 2 runs, one waiter executed", runs.Load(), counts)
		}
	})
}

func TestTransientErrorReleases(t *testing.T) {
	rt := newRuntime(t, idem.Options{})
	if _, err := idem.Do(bg, rt, "k", value2("", errTransient)); !errors.Is(err, errTransient) {
		t.Fatal(err)
	}
	var out idem.Outcome
	v, err := idem.Do(bg, rt, "k", value("ok"), idem.WithOutcome(&out))
	if err != nil || v != "ok" || out != idem.Executed {
		t.Fatalf("retry: %q %v %v", v, err, out)
	}
}

func TestPanicReachesEveryone(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		rt := newRuntime(t, idem.Options{Store: wrap(memStore(nil))})
		g := newGate()
		owner := goDo(bg, rt, "k", func(ctx context.Context) (string, error) {
			_, _ = g.fn("", nil)(ctx)
			panic("boom")
		})
		<-g.started
		waiters := []<-chan result{goDo(bg, rt, "k", mustNotRun(t)), goDo(bg, rt, "k", mustNotRun(t))}
		waitersAre(t, rt, 2)
		close(g.open)
		for _, ch := range append(waiters, owner) {
			r := recv(t, ch)
			var pe *idem.PanicError
			if !errors.As(r.err, &pe) || pe.Value != "boom" || pe.Key != "k" || len(pe.Stack) == 0 {
				t.Fatalf("got %+v, want a *PanicError", r)
			}
		}
		v, err := idem.Do(bg, rt, "k", value("after"))
		if err != nil || v != "after" {
			t.Fatalf("after a panic the key must be free: %q %v", v, err)
		}
	})
}

func TestPanicErrorUnwraps(t *testing.T) {
	rt := newRuntime(t, idem.Options{})
	_, err := idem.Do(bg, rt, "k", func(context.Context) (int, error) { panic(errDeclined) })
	if !errors.Is(err, errDeclined) {
		t.Fatalf("err = %v; a panic with an error value unwraps to it", err)
	}
}

// runtime.Goexit in the owner (t.FailNow) releases the key to a waiter.
func TestGoexitHandsOff(t *testing.T) {
	rt := newRuntime(t, idem.Options{})
	g := newGate()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = idem.Do(bg, rt, "k", func(ctx context.Context) (string, error) {
			_, _ = g.fn("", nil)(ctx)
			runtimeGoexit()
			return "", nil
		})
		t.Error("Do returned after Goexit")
	}()
	<-g.started
	waiter := goDo(bg, rt, "k", value("waiter ran"))
	waitersAre(t, rt, 1)
	close(g.open)
	<-done
	if r := recv(t, waiter); r.err != nil || r.v != "waiter ran" || r.out != idem.Executed {
		t.Fatalf("waiter: %+v", r)
	}
}
