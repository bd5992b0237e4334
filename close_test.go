package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

// Close answers everyone: waiters get ErrClosed at once, running functions
// are cancelled and their outcome is recorded before Close returns.
func TestCloseAnswersEveryone(t *testing.T) {
	modes(t, func(t *testing.T, wrap func(store.Store) store.Store) {
		mem := memStore(nil)
		rt, err := idem.New(idem.Options{Store: wrap(mem)})
		if err != nil {
			t.Fatal(err)
		}
		started := make(chan struct{}, 2)
		cancelled := idemtest.GoDo(bg, rt, "cancelled", func(ctx context.Context) (string, error) {
			started <- struct{}{}
			<-ctx.Done()
			return "", context.Cause(ctx)
		})
		finishing := idemtest.GoDo(bg, rt, "finishing", func(ctx context.Context) (string, error) {
			started <- struct{}{}
			<-ctx.Done()
			return "finished anyway", nil
		})
		<-started
		<-started
		var waiters []<-chan idemtest.Result
		for _, k := range []string{"cancelled", "cancelled", "finishing"} {
			waiters = append(waiters, idemtest.GoDo(bg, rt, k, idemtest.MustNotRun(t)))
		}
		waitersAre(t, rt, 3)
		if err := rt.Close(bg); err != nil {
			t.Fatal(err)
		}
		for _, ch := range waiters {
			if r := idemtest.Recv(t, ch); !errors.Is(r.Err, idem.ErrClosed) {
				t.Fatalf("waiter: %+v, want ErrClosed", r)
			}
		}
		if r := idemtest.Recv(t, cancelled); !errors.Is(r.Err, idem.ErrClosed) || r.Out != idem.Executed {
			t.Fatalf("cancelled owner: %+v", r)
		}
		if r := idemtest.Recv(t, finishing); r.Err != nil || r.V != "finished anyway" {
			t.Fatalf("finishing owner: %+v", r)
		}
		// The finished side effect was recorded before Close returned; the
		// cancelled one released its key.
		if rec, err := mem.Get(bg, "finishing"); err != nil || string(rec.Value) != `"finished anyway"` {
			t.Fatalf("stored record: %q %v", rec.Value, err)
		}
		if _, err := mem.Get(bg, "cancelled"); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("cancelled key: %v, want released", err)
		}
		if _, err := idem.Do(bg, rt, "later", idemtest.MustNotRun(t)); !errors.Is(err, idem.ErrClosed) {
			t.Fatalf("Do after Close: %v", err)
		}
		if err := rt.Forget(bg, "later"); !errors.Is(err, idem.ErrClosed) {
			t.Fatalf("Forget after Close: %v", err)
		}
		if err := rt.Close(bg); err != nil {
			t.Fatalf("second Close: %v", err)
		}
	})
}

// A function that ignores its context holds Close up to Close's own
// deadline; then everyone still waiting gets ErrClosed.
func TestCloseDeadline(t *testing.T) {
	rt, err := idem.New(idem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	g := idemtest.NewGate()
	owner := idemtest.GoDo(bg, rt, "k", g.Fn("late", nil))
	<-g.Started
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	if err := rt.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v, want its deadline", err)
	}
	close(g.Open)
	if r := idemtest.Recv(t, owner); !errors.Is(r.Err, idem.ErrClosed) {
		t.Fatalf("owner after a forced close: %+v", r)
	}
}

func TestCloseIdle(t *testing.T) {
	for range 3 {
		rt, err := idem.New(idem.Options{Shards: 8})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := idem.Do(bg, rt, "k", idemtest.Value("v")); err != nil {
			t.Fatal(err)
		}
		if err := rt.Close(bg); err != nil {
			t.Fatal(err)
		}
	}
}

// A Close after a Close that is done returns the first one's result, even
// with a context already ended (it once picked ctx.Done at random).
func TestCloseAfterCloseReturnsFirstResult(t *testing.T) {
	rt, err := idem.New(idem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(bg); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	cancel()
	bad := 0
	for range 100 {
		if err := rt.Close(ctx); err != nil {
			bad++
		}
	}
	if bad > 0 {
		t.Errorf("%d of 100 Close calls after a successful Close returned an error (ctx already done); want the first's result, nil", bad)
	}
}
