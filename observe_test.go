package idem_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// events collects CallEvents.
type events struct {
	mu  sync.Mutex
	evs []idem.CallEvent
}

func (e *events) OnCall(ev idem.CallEvent) {
	e.mu.Lock()
	e.evs = append(e.evs, ev)
	e.mu.Unlock()
}
func (e *events) OnStoreBatch(idem.StoreBatchEvent) {}
func (e *events) all() []idem.CallEvent {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]idem.CallEvent(nil), e.evs...)
}

// A function's own error that wraps context.DeadlineExceeded (an upstream
// call timed out) is the function's error, not "canceled": the caller's
// context is fine.
func TestFnTimeoutIsNotCallerCanceled(t *testing.T) {
	obs := &events{}
	rt := idemtest.Runtime(t, idem.Options{Observer: obs})
	_, err := idem.Do(bg, rt, "k", func(context.Context) (int, error) {
		return 0, fmt.Errorf("gateway: %w", context.DeadlineExceeded)
	})
	if err == nil {
		t.Fatal("no error")
	}
	evs := obs.all()
	if len(evs) != 1 || evs[0].Outcome != idem.Executed {
		t.Fatalf("events %+v", evs)
	}
	if evs[0].Result != idem.ResultError {
		t.Fatalf("fn's own timeout reported as result %q; the caller's context did not end", evs[0].Result)
	}
}

// The owner of a key whose function is stopped by Close gets ErrClosed
// (reported as "closed"), not a bare context.Canceled: its caller's context
// never ended.
func TestCloseDuringRunReportsClosed(t *testing.T) {
	obs := &events{}
	rt, err := idem.New(idem.Options{Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	ch := make(chan error, 1)
	go func() {
		_, err := idem.Do(bg, rt, "k", func(ctx context.Context) (int, error) {
			close(started)
			<-ctx.Done()
			return 0, ctx.Err()
		})
		ch <- err
	}()
	<-started
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	if err := rt.Close(ctx); err != nil {
		t.Fatal(err)
	}
	err = <-ch
	evs := obs.all()
	if !errors.Is(err, idem.ErrClosed) || len(evs) != 1 || evs[0].Result != idem.ResultClosed {
		t.Fatalf("owner stopped by Close: err %v; events %+v (want ErrClosed / result closed)", err, evs)
	}
}

// A caller that waited for a run in flight and then gave up (its context
// ended) is reported with the time it waited, so the settle-wait histogram
// sees the callers that waited longest.
func TestCanceledWaiterWaitReported(t *testing.T) {
	obs := &events{}
	rt := idemtest.Runtime(t, idem.Options{Observer: obs})
	g := idemtest.NewGate()
	owner := idemtest.GoDo(bg, rt, "k", g.Fn("v", nil))
	<-g.Started
	ctx, cancel := context.WithCancel(bg)
	waiter := idemtest.GoDo(ctx, rt, "k", idemtest.MustNotRun(t))
	waitersAre(t, rt, 1)
	time.Sleep(20 * time.Millisecond) // Wait is measured in real time, not on Options.Clock
	cancel()
	if r := idemtest.Recv(t, waiter); !errors.Is(r.Err, context.Canceled) {
		t.Fatalf("waiter: %v", r.Err)
	}
	close(g.Open)
	idemtest.Recv(t, owner)
	var ev *idem.CallEvent
	for _, e := range obs.all() {
		if e.Result == idem.ResultCanceled {
			ev = &e
		}
	}
	if ev == nil {
		t.Fatalf("no canceled event: %+v", obs.all())
	}
	if ev.Wait < 20*time.Millisecond {
		t.Fatalf("a caller parked for >20ms then cancelled reports Wait=%v", ev.Wait)
	}
}

// claimFails is a store whose claims fail (Redis down).
type claimFails struct{ store.Store }

func (c claimFails) Claim(context.Context, string, store.ClaimRequest) (store.ClaimResult, error) {
	return store.ClaimResult{}, errors.New("dial tcp: connection refused")
}

type recordHandler struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (h *recordHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordHandler) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.recs = append(h.recs, r)
	h.mu.Unlock()
	return nil
}
func (h *recordHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *recordHandler) WithGroup(string) slog.Handler      { return h }

// A store that fails every claim (the commonest store error: the store is
// down) is logged as a warning, at most once a second per shard.
func TestClaimStoreErrorLogged(t *testing.T) {
	h := &recordHandler{}
	ms := memstore.New(memstore.Options{})
	t.Cleanup(func() { ms.Close() })
	rt := idemtest.Runtime(t, idem.Options{Store: claimFails{ms}, Logger: slog.New(h)})
	for i := range 5 {
		_, err := idem.Do(bg, rt, fmt.Sprint("k", i), func(context.Context) (int, error) { return 1, nil })
		if !errors.Is(err, idem.ErrStoreUnavailable) {
			t.Fatalf("Do: %v", err)
		}
	}
	h.mu.Lock()
	n := len(h.recs)
	h.mu.Unlock()
	if n == 0 {
		t.Fatal("5 calls failed with ErrStoreUnavailable (claim) and nothing was logged")
	}
}

// A fail-fast caller (WithFailFast) of a key held by another instance
// waits for nothing, and is not reported as a wait.
func TestFailFastRemoteConflictNotAWait(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	t.Cleanup(func() { ms.Close() })
	rt1 := idemtest.Runtime(t, idem.Options{Store: ms})
	obs := &events{}
	rt2 := idemtest.Runtime(t, idem.Options{Store: ms, Observer: obs})
	g := idemtest.NewGate()
	owner := idemtest.GoDo(bg, rt1, "k", g.Fn("v", nil))
	<-g.Started
	_, err := idem.Do(bg, rt2, "k", func(context.Context) (string, error) { return "", nil }, idem.WithFailFast())
	close(g.Open)
	idemtest.Recv(t, owner)
	evs := obs.all()
	if !errors.Is(err, idem.ErrConflict) || len(evs) != 1 {
		t.Fatalf("%v %+v", err, evs)
	}
	if evs[0].Wait != 0 {
		t.Fatalf("fail-fast conflict on another instance's key reports Wait=%v", evs[0].Wait)
	}
}
