package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
)

// rowCount returns how many rows s's table holds, ended or not.
func rowCount(t testing.TB, s *pgstore.Store) int {
	t.Helper()
	var n int
	if err := sharedPool(t).QueryRow(bg, "SELECT count(*) FROM "+s.Table()).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// Cleanup deletes every row that has ended, in bounded batches, and
// nothing else: results past their TTL, claims past their lease and TTL,
// released keys past their claim's end.
func TestCleanup(t *testing.T) {
	t.Parallel()
	s := newStore(t, sharedPool(t), pgstore.Options{DisableCleanup: true, CleanupBatch: 7})
	short := 100 * time.Millisecond
	ended, live := 0, 0
	for i := range 20 {
		key := fmt.Sprint("k", i)
		lease, ttl := short, short
		if i%4 == 0 {
			lease, ttl = time.Hour, time.Hour
			live++
		} else {
			ended++
		}
		res, err := s.Claim(bg, key, store.ClaimRequest{Owner: "o", Lease: lease, TTL: ttl})
		if err != nil || res.Status != store.Claimed {
			t.Fatal(res.Status, err)
		}
		switch i % 3 {
		case 0:
			_, err = s.Complete(bg, key, res.Token, store.Record{Value: []byte("v")}, ttl)
		case 1:
			err = s.Release(bg, key, res.Token)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(3 * short)
	if n := rowCount(t, s); n != 20 {
		t.Fatalf("%d rows before the cleanup, want 20", n)
	}
	n, err := s.Cleanup(bg)
	if err != nil || n != int64(ended) {
		t.Fatalf("Cleanup deleted %d rows (%v), want %d", n, err, ended)
	}
	if n := rowCount(t, s); n != live {
		t.Fatalf("%d rows after the cleanup, want %d", n, live)
	}
	if n, err := s.Cleanup(bg); err != nil || n != 0 {
		t.Fatalf("a second Cleanup deleted %d rows (%v)", n, err)
	}
}

// Under a steady load of new keys whose results live 200ms, the
// background cleanup keeps the table at about the rows of the last TTL and
// interval, however long the load lasts, and empties it once the load
// stops.
func TestRowsStayBounded(t *testing.T) {
	t.Parallel()
	const (
		ttl      = 200 * time.Millisecond
		interval = 100 * time.Millisecond
		load     = 3 * time.Second
	)
	s := newStore(t, sharedPool(t), pgstore.Options{CleanupInterval: interval, CleanupBatch: 50})
	rt := newRuntime(t, idem.Options{Store: s})
	var done atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_, err := idem.Do(bg, rt, fmt.Sprintf("g%d-%d", g, i), func(context.Context) (int, error) { return i, nil }, idem.WithTTL(ttl))
				if err != nil {
					t.Error(err)
					return
				}
				done.Add(1)
			}
		})
	}
	start := time.Now()
	most := 0
	// On a loaded machine the keys come slower: run on until enough of
	// them have passed that the table's rows (those of the last TTL and
	// interval) are a small share of them, whatever the rate.
	for time.Since(start) < load || (done.Load() < 2500 && time.Since(start) < 25*time.Second) {
		time.Sleep(50 * time.Millisecond)
		most = max(most, rowCount(t, s))
	}
	close(stop)
	wg.Wait()
	elapsed := time.Since(start)
	rate := float64(done.Load()) / elapsed.Seconds()
	// A row lives its TTL, then waits for the next cleanup: at most
	// ttl+interval at a time, and twice that for the load's ups and downs.
	bound := int(2*rate*(ttl+interval).Seconds()) + 100
	t.Logf("%d keys in %v (%.0f/s); at most %d rows at a time (bound %d)", done.Load(), elapsed.Round(time.Millisecond), rate, most, bound)
	if most > bound {
		t.Errorf("the table grew to %d rows, more than %d", most, bound)
	}
	if int64(most)*5 > done.Load() {
		t.Errorf("the table held %d rows of the %d keys run: not much less than all of them", most, done.Load())
	}
	eventually(t, "an empty table after the load", func() bool { return rowCount(t, s) == 0 })
}

// A key whose row the cleanup deleted starts a new record with a fence
// above every earlier one (the fence's floor, from the server's clock),
// and attempt 1: the conformance suite's expiries never run the cleanup.
func TestFenceRisesAcrossCleanup(t *testing.T) {
	t.Parallel()
	s := newStore(t, sharedPool(t), pgstore.Options{DisableCleanup: true})
	// A lease long enough for the Complete below to come within it on a
	// loaded machine (50ms failed once in make test); a short TTL.
	short, lease := 50*time.Millisecond, 500*time.Millisecond
	var last uint64
	for i := range 3 {
		res, err := s.Claim(bg, "k", store.ClaimRequest{Owner: fmt.Sprint("o", i), Lease: lease, TTL: short})
		if err != nil || res.Status != store.Claimed || res.Attempt != 1 || res.Takeover {
			t.Fatalf("claim %d: %+v, %v; want a new record, attempt 1", i, res, err)
		}
		if res.Token.Fence <= last {
			t.Fatalf("claim %d: fence %d, the last was %d", i, res.Token.Fence, last)
		}
		last = res.Token.Fence
		if i%2 == 0 {
			if _, err := s.Complete(bg, "k", res.Token, store.Record{Value: []byte("v")}, short); err != nil {
				t.Fatal(err)
			}
		}
		time.Sleep(lease + 3*short) // past lease + TTL, completed or not
		if n, err := s.Cleanup(bg); err != nil || n != 1 {
			t.Fatalf("Cleanup deleted %d rows (%v), want the key's", n, err)
		}
	}
}
