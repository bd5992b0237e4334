package mailbox_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/idemrt/idem/mailbox"
)

func TestGateZeroValueIsUnlimited(t *testing.T) {
	var g mailbox.Gate
	const n = 100_000
	for i := range n {
		if !g.Enter() {
			t.Fatalf("zero Gate refused Enter #%d", i)
		}
	}
	if got := g.Pending(); got != n {
		t.Fatalf("Pending() = %d, want %d", got, n)
	}
	for range n {
		g.Leave()
	}
	if got := g.Pending(); got != 0 {
		t.Fatalf("Pending() = %d after every Leave, want 0", got)
	}
}

func TestGateLimit(t *testing.T) {
	var g mailbox.Gate
	g.SetLimit(3)
	for i := range 3 {
		if !g.Enter() {
			t.Fatalf("Enter #%d refused under the limit", i)
		}
	}
	for i := range 5 {
		if g.Enter() {
			t.Fatalf("Enter past the limit admitted (extra attempt %d)", i)
		}
		// A refusal must not leave its count behind.
		if got := g.Pending(); got != 3 {
			t.Fatalf("Pending() = %d after a refusal, want 3", got)
		}
	}
	g.Leave()
	if got := g.Pending(); got != 2 {
		t.Fatalf("Pending() = %d after Leave, want 2", got)
	}
	if !g.Enter() {
		t.Fatal("Enter refused after a Leave freed a slot")
	}
	if g.Enter() {
		t.Fatal("Enter admitted past the limit after refilling")
	}
}

func TestGateLimitOne(t *testing.T) {
	var g mailbox.Gate
	g.SetLimit(1)
	for i := range 100 {
		if !g.Enter() {
			t.Fatalf("round %d: Enter refused on an empty gate", i)
		}
		if g.Enter() {
			t.Fatalf("round %d: second Enter admitted with limit 1", i)
		}
		g.Leave()
	}
	if g.Pending() != 0 {
		t.Fatalf("Pending() = %d, want 0", g.Pending())
	}
}

func TestGateSetLimitZeroRemovesLimit(t *testing.T) {
	var g mailbox.Gate
	g.SetLimit(2)
	g.SetLimit(0)
	for i := range 1000 {
		if !g.Enter() {
			t.Fatalf("Enter #%d refused after SetLimit(0)", i)
		}
	}
}

// TestGateConcurrentNeverExceedsLimit has many goroutines Enter and Leave at
// once; the number admitted at any instant, counted independently of the
// Gate, must never pass the limit. Run it with -race.
func TestGateConcurrentNeverExceedsLimit(t *testing.T) {
	const limit = 4
	workers, rounds := 32, 2000
	if testing.Short() {
		rounds = 200
	}
	var g mailbox.Gate
	g.SetLimit(limit)

	var (
		inside   atomic.Int64 // admitted right now, by our own count
		peak     atomic.Int64
		admitted atomic.Int64
		refused  atomic.Int64
		start    = make(chan struct{})
		wg       sync.WaitGroup
	)
	for range workers {
		wg.Go(func() {
			<-start
			for range rounds {
				if !g.Enter() {
					refused.Add(1)
					continue
				}
				admitted.Add(1)
				n := inside.Add(1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				inside.Add(-1)
				g.Leave()
			}
		})
	}
	close(start)
	wg.Wait()

	if p := peak.Load(); p > limit {
		t.Fatalf("%d requests were admitted at once, limit %d", p, limit)
	}
	if admitted.Load() == 0 {
		t.Fatal("no Enter was ever admitted")
	}
	if got := admitted.Load() + refused.Load(); got != int64(workers*rounds) {
		t.Fatalf("%d Enter results, want %d", got, workers*rounds)
	}
	if got := g.Pending(); got != 0 {
		t.Fatalf("Pending() = %d after every admitted request left, want 0", got)
	}
}

// With no limit, concurrent Enter and Leave must keep an exact count.
func TestGateConcurrentUnlimitedCount(t *testing.T) {
	var g mailbox.Gate
	const workers, each = 16, 1000
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				if !g.Enter() {
					t.Error("unlimited Gate refused")
					return
				}
			}
		})
	}
	wg.Wait()
	if got := g.Pending(); got != workers*each {
		t.Fatalf("Pending() = %d, want %d", got, workers*each)
	}
	for range workers {
		wg.Go(func() {
			for range each {
				g.Leave()
			}
		})
	}
	wg.Wait()
	if got := g.Pending(); got != 0 {
		t.Fatalf("Pending() = %d, want 0", got)
	}
}
