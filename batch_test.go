package idem_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
)

// Store operations of one shard go out as batches, one at a time: the
// operations that arrive while a batch is out form the next one.
func TestGroupCommit(t *testing.T) {
	fs := &faultStore{Store: memStore(nil), batchGate: make(chan struct{})}
	rt := idemtest.Runtime(t, idem.Options{Store: fs, Shards: 1})
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			if _, err := idem.Do(bg, rt, fmt.Sprint("k", i), idemtest.Value("v")); err != nil {
				t.Error(err)
			}
		})
	}
	// The first batch is held at the store while the other calls arrive:
	// their claims wait for the next batch, not beside it.
	idemtest.Eventually(t, "every call in flight", func() bool { return rt.Stats().InFlight == n })
	close(fs.batchGate)
	wg.Wait()
	fs.mu.Lock()
	defer fs.mu.Unlock()
	ops, biggest := 0, 0
	for _, b := range fs.batches {
		ops += b
		biggest = max(biggest, b)
	}
	if fs.maxInFlight != 1 {
		t.Fatalf("%d batches of one shard were in flight at once, want 1", fs.maxInFlight)
	}
	if ops != 2*n || biggest < 2 {
		t.Fatalf("%d ops in %d batches (largest %d): want %d ops, some batched together", ops, len(fs.batches), biggest, 2*n)
	}
	if st := rt.Stats(); st.Ops != int64(ops) || st.Batches != int64(len(fs.batches)) {
		t.Fatalf("stats %+v disagree with the store's %d ops in %d batches", st, ops, len(fs.batches))
	}
}
