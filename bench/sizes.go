package main

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store/pgstore"
	"github.com/idemrt/idem/store/redisstore"
)

func heapNow() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// measureSizes measures idem's memory per key in flight and per stored
// record (Go heap, runtime and store), and on Redis the MEMORY USAGE of a
// record.
func measureSizes(ctx context.Context, e *env) (Sizes, error) {
	sz := Sizes{System: "idem"}
	if err := measureRecord(ctx, e, &sz); err != nil {
		return sz, err
	}
	err := measureInFlight(ctx, e, &sz)
	return sz, err
}

// measureRecord sets sz's sizes of a stored record: the Go heap per record
// over 50,000 stored ones and, on Redis, one record's MEMORY USAGE; on
// PostgreSQL, the table's bytes (heap, TOAST and indexes) per row.
func measureRecord(ctx context.Context, e *env, sz *Sizes) error {
	const stored = 50000
	sys, err := newSystem("idem", e, "sizes-stored")
	if err != nil {
		return err
	}
	s := sys.(*idemSystem)
	defer s.close()
	fn := func(context.Context) (receipt, error) { return receipt{ID: "rcpt-1", Amount: 4200}, nil }
	before := heapNow()
	// From many goroutines, so that a store's round trips overlap (the
	// heap after is the same).
	const callers = 64
	errs := make(chan error, callers)
	var wg sync.WaitGroup
	for g := range callers {
		wg.Go(func() {
			for i := g; i < stored; i += callers {
				if _, err := idem.Do(ctx, s.rt, fmt.Sprint("k", i), fn); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return err
	}
	sz.BytesPerRecord = float64(int64(heapNow())-int64(before)) / stored
	switch st := s.st.(type) {
	case *redisstore.Store:
		n, err := s.client.MemoryUsage(ctx, st.RecordKey("k0")).Result()
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

// measureInFlight sets sz's Go heap per key in flight, over 5,000 keys
// whose functions block until measured.
func measureInFlight(ctx context.Context, e *env, sz *Sizes) error {
	const inFlight = 5000
	sys, err := newSystem("idem", e, "sizes-inflight")
	if err != nil {
		return err
	}
	s := sys.(*idemSystem)
	defer s.close()
	gate := make(chan struct{})
	block := func(context.Context) (receipt, error) { <-gate; return receipt{}, nil }
	before := heapNow()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(gate)
	for i := range inFlight {
		wg.Go(func() { _, _ = idem.Do(ctx, s.rt, fmt.Sprint("f", i), block) })
	}
	deadline := time.Now().Add(30 * time.Second)
	for s.rt.Stats().InFlight < inFlight && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if got := s.rt.Stats().InFlight; got < inFlight {
		return fmt.Errorf("only %d of %d keys got in flight", got, inFlight)
	}
	sz.BytesPerInFlightKey = float64(int64(heapNow())-int64(before)) / inFlight
	return nil
}
