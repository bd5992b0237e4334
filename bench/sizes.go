package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store/pgstore"
	"github.com/idemrt/idem/store/redisstore"
)

// sizeSample is what measureSizes adds per round of its heap measurements
// (see heap.go): records stored, keys in flight. The package's tests make
// it smaller.
var sizeSample = struct{ records, inFlight, rounds int }{records: 15000, inFlight: 5000, rounds: 3}

// measureSizes measures idem's memory per key in flight and per stored
// record (Go heap, runtime and store), and on Redis the MEMORY USAGE of a
// record.
func measureSizes(ctx context.Context, e *env) (Sizes, error) {
	sz := Sizes{System: "idem", Rounds: sizeSample.rounds, Records: sizeSample.records, InFlightKeys: sizeSample.inFlight}
	hm := heapMeter{rounds: sizeSample.rounds, read: liveHeap}
	rounds := &idemRounds{e: e}
	defer rounds.close()
	if err := measureRecord(ctx, rounds, hm, &sz); err != nil {
		return sz, err
	}
	err := measureInFlight(ctx, rounds, hm, &sz)
	return sz, err
}

// idemRounds makes the idem systems of the measurements' rounds, a new
// one per round, so that each round repeats the same experiment, and
// closes them all once every measurement is over (see heapMeter.measure).
type idemRounds struct {
	e       *env
	systems []*idemSystem
}

// warmCalls is how many calls a round's runtime completes before its
// first reading, at once: the store client's connections and what else a
// runtime makes on first use are not a cost per key.
const warmCalls = 64

func (r *idemRounds) next(ctx context.Context, scenario string) (*idemSystem, error) {
	sys, err := newSystem("idem", r.e, scenario)
	if err != nil {
		return nil, err
	}
	s := sys.(*idemSystem)
	r.systems = append(r.systems, s)
	fn := func(context.Context) (receipt, error) { return receipt{ID: "rcpt-1", Amount: 4200}, nil }
	errs := make(chan error, warmCalls)
	var wg sync.WaitGroup
	for i := range warmCalls {
		wg.Go(func() {
			if _, err := idem.Do(ctx, s.rt, fmt.Sprint("warm-", i), fn); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return s, <-errs
}

func (r *idemRounds) close() {
	for _, s := range r.systems {
		s.close()
	}
}

// measureRecord sets sz's sizes of a stored record: the Go heap per record
// (sizeSample.records stored in a new runtime per round) and, on Redis,
// one record's MEMORY USAGE; on PostgreSQL, the table's bytes (heap,
// TOAST and indexes) per row.
func measureRecord(ctx context.Context, rounds *idemRounds, hm heapMeter, sz *Sizes) error {
	n := sizeSample.records
	first := len(rounds.systems)
	fn := func(context.Context) (receipt, error) { return receipt{ID: "rcpt-1", Amount: 4200}, nil }
	fig, err := hm.measure(n, func(round int) (heapRound, error) {
		s, err := rounds.next(ctx, "sizes-stored")
		if err != nil {
			return heapRound{}, err
		}
		return heapRound{add: func() error {
			// From many goroutines, so that a store's round trips overlap
			// (the heap after is the same).
			const callers = 64
			errs := make(chan error, callers)
			var wg sync.WaitGroup
			for g := range callers {
				wg.Go(func() {
					for i := g; i < n; i += callers {
						if _, err := idem.Do(ctx, s.rt, recordKey(round, i), fn); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			return <-errs
		}}, nil
	})
	if err != nil {
		return err
	}
	sz.BytesPerRecord, sz.RecordRounds, sz.RecordDropped, sz.RecordUnsound = fig.PerUnit, fig.Rounds, fig.Dropped, fig.Unsound
	s := rounds.systems[first]
	switch st := s.st.(type) {
	case *redisstore.Store:
		n, err := s.client.MemoryUsage(ctx, st.RecordKey(recordKey(0, 0))).Result()
		if err == nil {
			sz.RedisBytesPerRecord = float64(n)
		}
	case *pgstore.Store:
		var n float64
		err := s.pg.QueryRow(ctx, "SELECT pg_total_relation_size($1::regclass)::float8 / count(*) FROM "+st.Table(), st.Table()).Scan(&n)
		if err == nil {
			sz.PostgresBytesPerRecord = n
		}
	}
	return nil
}

func recordKey(round, i int) string { return fmt.Sprintf("k%d-%d", round, i) }

// measureInFlight sets sz's Go heap per key in flight: each round puts
// sizeSample.inFlight keys in flight in a new runtime, their functions
// blocked until the heap is read, then lets them complete. The callers'
// goroutines are the measurement's: the first round also counts the
// descriptors of the new ones (about 490 B each), which the Go runtime
// reuses in the later rounds; the median leaves it out.
func measureInFlight(ctx context.Context, rounds *idemRounds, hm heapMeter, sz *Sizes) error {
	n := sizeSample.inFlight
	fig, err := hm.measure(n, func(round int) (heapRound, error) {
		s, err := rounds.next(ctx, "sizes-inflight")
		if err != nil {
			return heapRound{}, err
		}
		gate := make(chan struct{})
		block := func(context.Context) (receipt, error) { <-gate; return receipt{}, nil }
		var wg sync.WaitGroup
		return heapRound{
			add: func() error {
				for i := range n {
					wg.Go(func() { _, _ = idem.Do(ctx, s.rt, fmt.Sprintf("f%d-%d", round, i), block) })
				}
				return waitInFlight(s.rt, n)
			},
			done: func() { close(gate); wg.Wait() },
		}, nil
	})
	if err != nil {
		return err
	}
	sz.BytesPerInFlightKey, sz.InFlightRounds, sz.InFlightDropped, sz.InFlightUnsound = fig.PerUnit, fig.Rounds, fig.Dropped, fig.Unsound
	return nil
}

// waitInFlight waits up to 30 s for rt to have n keys in flight.
func waitInFlight(rt *idem.Runtime, n int) error {
	deadline := time.Now().Add(30 * time.Second)
	for rt.Stats().InFlight != n && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if got := rt.Stats().InFlight; got != n {
		return fmt.Errorf("%d keys in flight, want %d", got, n)
	}
	return nil
}
