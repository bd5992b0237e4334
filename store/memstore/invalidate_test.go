package memstore_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem/internal/storesuite"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// Two runtimes share one Store: a Forget or a Clear on one reaches the
// other's cache; see storesuite.Invalidate.
func TestInvalidate(t *testing.T) {
	s := memstore.New(memstore.Options{})
	defer s.Close()
	storesuite.Invalidate(t, s, s)
}

// A read of the store that comes back after the invalidation caches
// nothing; see storesuite.InvalidateRace.
func TestInvalidateRace(t *testing.T) {
	s := memstore.New(memstore.Options{})
	defer s.Close()
	storesuite.InvalidateRace(t, s, s)
}

// stop waits until fn is no longer called (store.Invalidator's contract):
// a subscriber whose fn is running when stop is called must not see stop
// return before fn does. A runtime relies on it at Close: once its
// subscription is stopped, nothing reaches its shards.
func TestInvalidateStopWaitsForFn(t *testing.T) {
	s := memstore.New(memstore.Options{})
	defer s.Close()
	ctx := context.Background()
	tok, err := s.Claim(ctx, "k", store.ClaimRequest{Owner: "o", Lease: time.Minute, TTL: time.Hour})
	if err != nil || tok.Status != store.Claimed {
		t.Fatalf("claim: %+v %v", tok, err)
	}
	if _, err := s.Complete(ctx, "k", tok.Token, store.Record{Value: []byte("v")}, time.Hour); err != nil {
		t.Fatal(err)
	}
	entered, release := make(chan struct{}), make(chan struct{})
	var stopReturned, calledAfterStop atomic.Bool
	var once sync.Once
	stop, err := s.SubscribeInvalidations(ctx, func(store.Invalidation) {
		once.Do(func() { close(entered) })
		<-release
		if stopReturned.Load() {
			calledAfterStop.Store(true)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	forgot := make(chan error, 1)
	go func() { forgot <- s.Forget(ctx, "k") }()
	<-entered // fn runs, and is held
	stopped := make(chan struct{})
	go func() {
		stop()
		stopReturned.Store(true)
		close(stopped)
	}()
	select {
	case <-stopped: // the bug: stop did not wait for fn
	case <-time.After(100 * time.Millisecond): // stop waits, as it must
	}
	close(release)
	if err := <-forgot; err != nil {
		t.Fatal(err)
	}
	<-stopped
	if calledAfterStop.Load() {
		t.Fatal("stop returned while fn was still running")
	}
}
