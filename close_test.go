package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem"
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
		cancelled := goDo(bg, rt, "cancelled", func(ctx context.Context) (string, error) {
			started <- struct{}{}
			<-ctx.Done()
			return "", context.Cause(ctx)
		})
		finishing := goDo(bg, rt, "finishing", func(ctx context.Context) (string, error) {
			started <- struct{}{}
			<-ctx.Done()
			return "finished anyway", nil
		})
		<-started
		<-started
		var waiters []<-chan result
		for _, k := range []string{"cancelled", "cancelled", "finishing"} {
			waiters = append(waiters, goDo(bg, rt, k, mustNotRun(t)))
		}
		waitersAre(t, rt, 3)
		if err := rt.Close(bg); err != nil {
			t.Fatal(err)
		}
		for _, ch := range waiters {
			if r := recv(t, ch); !errors.Is(r.err, idem.ErrClosed) {
				t.Fatalf("waiter: %+v, want ErrClosed", r)
			}
		}
		if r := recv(t, cancelled); !errors.Is(r.err, idem.ErrClosed) || r.out != idem.Executed {
			t.Fatalf("cancelled owner: %+v", r)
		}
		if r := recv(t, finishing); r.err != nil || r.v != "finished anyway" {
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
		if _, err := idem.Do(bg, rt, "later", mustNotRun(t)); !errors.Is(err, idem.ErrClosed) {
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
	g := newGate()
	owner := goDo(bg, rt, "k", g.fn("late", nil))
	<-g.started
	ctx, cancel := context.WithTimeout(bg, 50*time.Millisecond)
	defer cancel()
	if err := rt.Close(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Close: %v, want its deadline", err)
	}
	close(g.open)
	if r := recv(t, owner); !errors.Is(r.err, idem.ErrClosed) {
		t.Fatalf("owner after a forced close: %+v", r)
	}
}

func TestCloseIdle(t *testing.T) {
	for range 3 {
		rt, err := idem.New(idem.Options{Shards: 8})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := idem.Do(bg, rt, "k", value("v")); err != nil {
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
