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
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

// N callers of one key: fn runs once, all get its value, one executed and
// the others joined.
func TestStormRunsOnce(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		rt := idemtest.Runtime(t, idem.Options{Store: wrap(memStore(nil))})
		const n = 200
		g := idemtest.NewGate()
		chans := make([]<-chan idemtest.Result, n)
		for i := range chans {
			chans[i] = idemtest.GoDo(bg, rt, "storm", g.Fn("charged", nil))
		}
		<-g.Started
		waitersAre(t, rt, n-1)
		close(g.Open)
		counts := map[idem.Outcome]int{}
		for _, ch := range chans {
			r := idemtest.Recv(t, ch)
			if r.Err != nil || r.V != "charged" {
				t.Fatalf("caller got %q, %v", r.V, r.Err)
			}
			counts[r.Out]++
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
		rt := idemtest.Runtime(t, idem.Options{Store: wrap(memStore(nil)), CacheEntries: 16})
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
			rt := idemtest.Runtime(t, idem.Options{DisableCache: disable})
			if _, err := idem.Do(bg, rt, "k", idemtest.Value("first")); err != nil {
				t.Fatal(err)
			}
			var out idem.Outcome
			v, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t), idem.WithOutcome(&out))
			if err != nil || v != "first" || out != idem.Replayed {
				t.Fatalf("replay = %q, %v, %v", v, err, out)
			}
		})
	}
}

func TestSettleZeroFailsFast(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		rt := idemtest.Runtime(t, idem.Options{Store: wrap(memStore(nil)), Policy: idem.Policy{Lease: time.Minute}})
		g := idemtest.NewGate()
		owner := idemtest.GoDo(bg, rt, "k", g.Fn("v", nil))
		<-g.Started
		_, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t), idem.WithFailFast())
		var ce *idem.ConflictError
		if !errors.Is(err, idem.ErrConflict) || !errors.As(err, &ce) {
			t.Fatalf("err = %v, want a *ConflictError", err)
		}
		if ce.Key != "k" || ce.State != "in-progress" || ce.LeaseLeft <= 0 || ce.LeaseLeft > time.Minute {
			t.Fatalf("conflict details %+v", ce)
		}
		close(g.Open)
		if r := idemtest.Recv(t, owner); r.Err != nil || r.Out != idem.Executed {
			t.Fatalf("owner: %+v", r)
		}
	})
}

// A waiter whose settle time runs out gets ErrConflict; the owner and the
// other waiters are not disturbed.
func TestSettleTimeoutLeavesEntry(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		clk := idemtest.FakeClock()
		rt := idemtest.Runtime(t, idem.Options{Store: wrap(memStore(clk)), Clock: clk})
		g := idemtest.NewGate()
		var ownerCtx context.Context
		owner := idemtest.GoDo(bg, rt, "k", func(ctx context.Context) (string, error) {
			ownerCtx = ctx
			return g.Fn("v", nil)(ctx)
		})
		<-g.Started
		short := idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t), idem.WithSettle(time.Second))
		patient := idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t))
		waitersAre(t, rt, 2)
		clk.Advance(time.Second)
		r := idemtest.Recv(t, short)
		if !errors.Is(r.Err, idem.ErrConflict) {
			t.Fatalf("short waiter: %+v, want ErrConflict", r)
		}
		waitersAre(t, rt, 1)
		if ownerCtx.Err() != nil {
			t.Fatal("a waiter's timeout cancelled the owner")
		}
		close(g.Open)
		if r := idemtest.Recv(t, patient); r.Err != nil || r.V != "v" || r.Out != idem.Joined {
			t.Fatalf("patient waiter: %+v", r)
		}
		if r := idemtest.Recv(t, owner); r.Err != nil || r.V != "v" {
			t.Fatalf("owner: %+v", r)
		}
	})
}

// A waiter whose context ends leaves; the owner goes on and the others get
// the result.
func TestWaiterCancelOnlyLeaves(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		rt := idemtest.Runtime(t, idem.Options{Store: wrap(memStore(nil))})
		g := idemtest.NewGate()
		owner := idemtest.GoDo(bg, rt, "k", g.Fn("v", nil))
		<-g.Started
		ctx, cancel := context.WithCancel(bg)
		leaver := idemtest.GoDo(ctx, rt, "k", idemtest.MustNotRun(t))
		stayer := idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t))
		waitersAre(t, rt, 2)
		cancel()
		if r := idemtest.Recv(t, leaver); !errors.Is(r.Err, context.Canceled) {
			t.Fatalf("cancelled waiter: %+v", r)
		}
		waitersAre(t, rt, 1)
		close(g.Open)
		if r := idemtest.Recv(t, stayer); r.Err != nil || r.V != "v" {
			t.Fatalf("other waiter: %+v", r)
		}
		if r := idemtest.Recv(t, owner); r.Err != nil {
			t.Fatalf("owner: %+v", r)
		}
	})
}

// An owner whose context is cancelled returns at once; its function goes on
// (under a context that is not cancelled) and its result is stored.
func TestOwnerCancelKeepsWork(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		rt := idemtest.Runtime(t, idem.Options{Store: wrap(memStore(nil))})
		g := idemtest.NewGate()
		var fnCtx context.Context
		ctx, cancel := context.WithCancel(context.WithValue(bg, ctxKey{}, "carried"))
		owner := idemtest.GoDo(ctx, rt, "k", func(c context.Context) (string, error) {
			fnCtx = c
			return g.Fn("v", nil)(c)
		})
		<-g.Started
		waiter := idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t))
		waitersAre(t, rt, 1)
		cancel()
		if r := idemtest.Recv(t, owner); !errors.Is(r.Err, context.Canceled) || r.Out != idem.Executed {
			t.Fatalf("cancelled owner: %+v", r)
		}
		if fnCtx.Err() != nil || fnCtx.Value(ctxKey{}) != "carried" {
			t.Fatalf("fn context: err %v value %v; want not cancelled, values kept", fnCtx.Err(), fnCtx.Value(ctxKey{}))
		}
		close(g.Open)
		if r := idemtest.Recv(t, waiter); r.Err != nil || r.V != "v" || r.Out != idem.Joined {
			t.Fatalf("waiter: %+v", r)
		}
		v, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t))
		if err != nil || v != "v" {
			t.Fatalf("later call: %q, %v", v, err)
		}
	})
}

type ctxKey struct{}

func TestOwnerDeadlineBoundsFunction(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
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

// WithOwnerWaits keeps the owner's call until its function has returned,
// even after the caller's context ended.
func TestWithOwnerWaits(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	ctx, cancel := context.WithCancel(bg)
	var finished atomic.Bool
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := idem.Do(ctx, rt, "k", func(fctx context.Context) (string, error) {
			close(started)
			time.Sleep(50 * time.Millisecond) // time for a call that does not wait to return first
			finished.Store(true)
			return "v", fctx.Err()
		}, idem.WithOwnerWaits())
		done <- err
	}()
	<-started
	cancel()
	<-done
	if !finished.Load() {
		t.Fatal("the owner's call returned before its function")
	}
	if v, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t)); err != nil || v != "v" {
		t.Fatalf("stored result: %q %v", v, err)
	}
}

var errDeclined = errors.New("card declined")

func TestPermanentErrorReplayed(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		clk := idemtest.FakeClock()
		rt := idemtest.Runtime(t, idem.Options{Store: wrap(memStore(clk)), Clock: clk})
		g := idemtest.NewGate()
		owner := idemtest.GoDo(bg, rt, "k", g.Fn("", idem.Permanent(errDeclined)), idem.WithTTL(time.Hour))
		<-g.Started
		waiter := idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t))
		waitersAre(t, rt, 1)
		close(g.Open)
		for _, r := range []idemtest.Result{idemtest.Recv(t, owner), idemtest.Recv(t, waiter)} {
			if !errors.Is(r.Err, errDeclined) || !idem.IsPermanent(r.Err) {
				t.Fatalf("%v: err %v, want the permanent decline", r.Out, r.Err)
			}
		}
		var out idem.Outcome
		_, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t), idem.WithOutcome(&out))
		if !errors.Is(err, errDeclined) || out != idem.Replayed {
			t.Fatalf("replay: %v %v", err, out)
		}
		clk.Advance(time.Hour)
		v, err := idem.Do(bg, rt, "k", idemtest.Value("retried"))
		if err != nil || v != "retried" {
			t.Fatalf("after the TTL: %q, %v; want a new run", v, err)
		}
	})
}

// From the store (another process, or after the cache), a permanent error
// comes back as a *ReplayedError with its message.
func TestPermanentErrorFromStore(t *testing.T) {
	st := memStore(nil)
	rt1 := idemtest.Runtime(t, idem.Options{Store: st})
	rt2 := idemtest.Runtime(t, idem.Options{Store: st})
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
	rt := idemtest.Runtime(t, idem.Options{Policy: idem.Policy{Classifier: isDecline}})
	_, err := idem.Do(bg, rt, "a", value2("", errDeclined))
	_, err2 := idem.Do(bg, rt, "a", idemtest.MustNotRun(t))
	if !errors.Is(err, errDeclined) || !errors.Is(err2, errDeclined) {
		t.Fatalf("Options.Classifier: %v, then %v", err, err2)
	}
	_, err = idem.Do(bg, rt, "b", value2("", errDeclined), idem.WithClassifier(func(error) bool { return false }))
	v, err2 := idem.Do(bg, rt, "b", idemtest.Value("ran again"))
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
		rt := idemtest.Runtime(t, idem.Options{Store: wrap(memStore(nil))})
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
		owner := idemtest.GoDo(bg, rt, "k", fn)
		<-first
		var waiters []<-chan idemtest.Result
		for range 5 {
			waiters = append(waiters, idemtest.GoDo(bg, rt, "k", fn))
		}
		waitersAre(t, rt, 5)
		close(release)
		if r := idemtest.Recv(t, owner); !errors.Is(r.Err, errTransient) || r.Out != idem.Executed {
			t.Fatalf("owner: %+v", r)
		}
		counts := map[idem.Outcome]int{}
		for _, ch := range waiters {
			r := idemtest.Recv(t, ch)
			if r.Err != nil || r.V != "second run" {
				t.Fatalf("waiter: %+v", r)
			}
			counts[r.Out]++
		}
		if runs.Load() != 2 || counts[idem.Executed] != 1 || counts[idem.Joined] != 4 {
			t.Fatalf("runs %d, outcomes %v; want 2 runs, one waiter executed", runs.Load(), counts)
		}
	})
}

func TestTransientErrorReleases(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	if _, err := idem.Do(bg, rt, "k", value2("", errTransient)); !errors.Is(err, errTransient) {
		t.Fatal(err)
	}
	var out idem.Outcome
	v, err := idem.Do(bg, rt, "k", idemtest.Value("ok"), idem.WithOutcome(&out))
	if err != nil || v != "ok" || out != idem.Executed {
		t.Fatalf("retry: %q %v %v", v, err, out)
	}
}

func TestPanicReachesEveryone(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		rt := idemtest.Runtime(t, idem.Options{Store: wrap(memStore(nil))})
		g := idemtest.NewGate()
		owner := idemtest.GoDo(bg, rt, "k", func(ctx context.Context) (string, error) {
			_, _ = g.Fn("", nil)(ctx)
			panic("boom")
		})
		<-g.Started
		waiters := []<-chan idemtest.Result{idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t)), idemtest.GoDo(bg, rt, "k", idemtest.MustNotRun(t))}
		waitersAre(t, rt, 2)
		close(g.Open)
		for _, ch := range append(waiters, owner) {
			r := idemtest.Recv(t, ch)
			var pe *idem.PanicError
			if !errors.As(r.Err, &pe) || pe.Value != "boom" || pe.Key != "k" || len(pe.Stack) == 0 {
				t.Fatalf("got %+v, want a *PanicError", r)
			}
		}
		v, err := idem.Do(bg, rt, "k", idemtest.Value("after"))
		if err != nil || v != "after" {
			t.Fatalf("after a panic the key must be free: %q %v", v, err)
		}
	})
}

func TestPanicErrorUnwraps(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	_, err := idem.Do(bg, rt, "k", func(context.Context) (int, error) { panic(errDeclined) })
	if !errors.Is(err, errDeclined) {
		t.Fatalf("err = %v; a panic with an error value unwraps to it", err)
	}
}

// runtime.Goexit in the owner (t.FailNow) releases the key to a waiter.
func TestGoexitHandsOff(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	g := idemtest.NewGate()
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = idem.Do(bg, rt, "k", func(ctx context.Context) (string, error) {
			_, _ = g.Fn("", nil)(ctx)
			runtimeGoexit()
			return "", nil
		})
		t.Error("Do returned after Goexit")
	}()
	<-g.Started
	waiter := idemtest.GoDo(bg, rt, "k", idemtest.Value("waiter ran"))
	waitersAre(t, rt, 1)
	close(g.Open)
	<-done
	if r := idemtest.Recv(t, waiter); r.Err != nil || r.V != "waiter ran" || r.Out != idem.Executed {
		t.Fatalf("waiter: %+v", r)
	}
}
