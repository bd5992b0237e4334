package idem_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store/memstore"
)

// Early takeover with two runtimes sharing a memstore: one stops beating
// (as a SIGKILLed process would, its runs still hanging), and the other
// takes its key over long before the key's lease ends.

// beats is a memstore whose liveness beats can be made to fail.
type beats struct {
	*memstore.Store
	down atomic.Bool
}

var errBeatDown = errors.New("test: beats cut")

func (b *beats) Beat(ctx context.Context, instance string, ttl time.Duration) error {
	if b.down.Load() {
		return errBeatDown
	}
	return b.Store.Beat(ctx, instance, ttl)
}

func (b *beats) Live(ctx context.Context, instance string) (bool, error) {
	if b.down.Load() {
		return false, errBeatDown
	}
	return b.Store.Live(ctx, instance)
}

var quickLiveness = idem.Liveness{Every: 20 * time.Millisecond, TTL: 100 * time.Millisecond, Grace: 150 * time.Millisecond}

func TestEarlyTakeoverOfDeadInstance(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	dying := &beats{Store: ms}
	a, err := idem.New(idem.Options{Store: dying, Liveness: quickLiveness})
	if err != nil {
		t.Fatal(err)
	}
	b, err := idem.New(idem.Options{Store: ms, Liveness: quickLiveness})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())

	hang := make(chan struct{})
	started := make(chan struct{})
	go idem.Do(context.Background(), a, "k", func(ctx context.Context) (string, error) {
		close(started)
		<-hang
		return "a", nil
	})
	<-started
	dying.down.Store(true) // a's beats stop; its lease (60s) is renewed as usual

	begin := time.Now()
	got, err := idem.Do(context.Background(), b, "k", func(ctx context.Context) (string, error) { return "b", nil })
	took := time.Since(begin)
	if err != nil || got != "b" {
		t.Fatalf("b's Do = %q, %v; want its own run", got, err)
	}
	// Well short of the 60s lease: an early takeover, not the lease's end.
	if took > 20*time.Second {
		t.Fatalf("takeover took %v", took)
	}
	t.Logf("taken over after %v", took)
	if n := b.Stats().EarlyTakeovers; n != 1 {
		t.Fatalf("b counted %d early takeovers, want 1", n)
	}
	close(hang)
	a.Close(context.Background())
	rec, err := ms.Get(context.Background(), "k")
	if err != nil || string(rec.Value) != `"b"` {
		t.Fatalf("stored %q, %v; want b's result, a's refused", rec.Value, err)
	}
}

// A runtime whose own beats fail takes nobody for dead, and after they
// succeed again waits the grace: a store outage hands over no live key.
func TestNoTakeoverAfterOwnOutage(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	aView, view := &beats{Store: ms}, &beats{Store: ms}
	a, err := idem.New(idem.Options{Store: aView, Liveness: quickLiveness})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close(context.Background())
	b, err := idem.New(idem.Options{Store: view, Liveness: idem.Liveness{Every: 20 * time.Millisecond, TTL: 100 * time.Millisecond, Grace: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(context.Background())

	release := make(chan struct{})
	started := make(chan struct{})
	var runs atomic.Int32
	fn := func(ctx context.Context) (string, error) {
		runs.Add(1)
		select {
		case <-started:
		default:
			close(started)
		}
		<-release
		return "once", nil
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if v, err := idem.Do(context.Background(), a, "k", fn); err != nil || v != "once" {
			t.Errorf("a's Do = %q, %v", v, err)
		}
	}()
	<-started
	// Neither can beat for longer than the TTL: a's record ends.
	view.down.Store(true)
	aView.down.Store(true)
	got := make(chan string, 1)
	go func() {
		v, err := idem.Do(context.Background(), b, "k", fn)
		if err != nil {
			t.Errorf("b's Do: %v", err)
		}
		got <- v
	}()
	time.Sleep(300 * time.Millisecond)
	// b is back first and reads a's record as ended; a beats again 300ms
	// later, within b's grace.
	view.down.Store(false)
	time.Sleep(300 * time.Millisecond)
	aView.down.Store(false)
	time.Sleep(1200 * time.Millisecond) // past b's grace: a is live
	close(release)
	<-done
	if v := <-got; v != "once" {
		t.Fatalf("b got %q", v)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("%d runs, want 1", n)
	}
}

func TestLivenessOptionsChecked(t *testing.T) {
	for _, l := range []idem.Liveness{
		{Every: -time.Second},
		{TTL: time.Second}, // not more than the default Every
		{Every: 2 * time.Second, TTL: time.Second},
		{Grace: -1},
	} {
		if _, err := idem.New(idem.Options{Liveness: l}); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("Liveness %+v: %v, want ErrInvalidArgument", l, err)
		}
	}
}
