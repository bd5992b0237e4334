package idem_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

var bg = context.Background()

// modes runs f with the two ways a runtime talks to its store: inline (an
// in-process store) and through batches on an I/O worker (any other store).
func modes(t *testing.T, f func(t *testing.T, wrap func(store.Store) store.Store)) {
	t.Run("inline", func(t *testing.T) { f(t, func(s store.Store) store.Store { return s }) })
	t.Run("batched", func(t *testing.T) { f(t, func(s store.Store) store.Store { return &faultStore{Store: s} }) })
}

// waitersAre waits until rt has n parked callers.
func waitersAre(t testing.TB, rt *idem.Runtime, n int) {
	t.Helper()
	idemtest.Eventually(t, "parked callers", func() bool { return rt.Stats().Waiters == n })
}

// faultStore wraps a store (hiding store.InProcess, so the runtime batches
// its operations) and injects faults.
type faultStore struct {
	store.Store
	mu          sync.Mutex
	extendErr   error
	completeErr error
	claimGate   chan struct{}
	batches     []int
	inFlight    int
	maxInFlight int
	batchDelay  time.Duration
}

func (f *faultStore) Claim(ctx context.Context, key string, req store.ClaimRequest) (store.ClaimResult, error) {
	f.mu.Lock()
	g := f.claimGate
	f.mu.Unlock()
	if g != nil {
		<-g
	}
	return f.Store.Claim(ctx, key, req)
}

func (f *faultStore) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	f.mu.Lock()
	err := f.extendErr
	f.mu.Unlock()
	if err != nil {
		return err
	}
	return f.Store.Renew(ctx, key, tok, lease)
}

func (f *faultStore) Complete(ctx context.Context, key string, tok store.Token, rec store.Record, ttl time.Duration) (store.Record, error) {
	f.mu.Lock()
	err := f.completeErr
	f.mu.Unlock()
	if err != nil {
		return store.Record{}, err
	}
	return f.Store.Complete(ctx, key, tok, rec, ttl)
}

// Batch records each batch's size and how many batches overlap.
func (f *faultStore) Batch(ctx context.Context, ops []*store.Op) {
	f.mu.Lock()
	f.batches = append(f.batches, len(ops))
	f.inFlight++
	f.maxInFlight = max(f.maxInFlight, f.inFlight)
	delay := f.batchDelay
	f.mu.Unlock()
	time.Sleep(delay)
	for _, op := range ops {
		store.RunOne(ctx, f, op)
	}
	f.mu.Lock()
	f.inFlight--
	f.mu.Unlock()
}

// Subscribe passes wake-ups through when the wrapped store has them.
func (f *faultStore) Subscribe(ctx context.Context, fn func(string)) (string, func(), error) {
	if w, ok := f.Store.(store.Waker); ok {
		return w.Subscribe(ctx, fn)
	}
	return "", func() {}, errors.New("no waker")
}

func memStore(c clock.Clock) *memstore.Store { return memstore.New(memstore.Options{Clock: c}) }
