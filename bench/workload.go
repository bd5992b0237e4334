package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// worker is one caller goroutine's state: its function (bound once, so that
// calls allocate nothing for it) and its measurements.
type worker struct {
	tr     *tracker
	id     int64 // the key id of the call in progress
	work   time.Duration
	fn     workFn
	lat    hist
	settle hist
	// settleAny records the settle latency of every call that did not
	// execute (joined or replayed), not only of those that joined: in the
	// xstorm scenario a duplicate on another instance may find the result
	// stored already.
	settleAny bool
	// inst is the instance the worker calls (xstorm); settleOther and
	// settleSame split its settle latencies by whether the owner's
	// execution ran on another instance or on inst, where the duplicate is
	// released in-process.
	inst        int32
	settleOther hist
	settleSame  hist
	calls       atomic.Int64
	// negSettle counts the settle samples that came out negative, recorded
	// as 0: another execution of the key (a key run twice) returned after
	// this duplicate had and overwrote doneAt.
	negSettle int64
	errors    int64
	wrong     int64
	outs      [numOutcomes]int64
	_         [64]byte
	lastErr   error
	rng       *rand.Rand
}

func newWorker(tr *tracker, work time.Duration) *worker {
	w := &worker{tr: tr, work: work}
	w.fn = w.run
	return w
}

// run is the benchmarked side effect: count the execution, take the work
// time, note when it returned.
func (w *worker) run(context.Context) (receipt, error) {
	s := w.tr.slot(w.id)
	s.execs.Add(1)
	if w.work > 0 {
		time.Sleep(w.work)
	}
	s.owner.Store(w.inst + 1)
	s.doneAt.Store(sinceEpoch())
	return receipt{ID: keyString("rcpt-", w.id), Amount: 4200}, nil
}

// call runs one call of key id on sys and records it.
func (w *worker) call(ctx context.Context, sys system, prefix string, id int64, withOutcome bool, start time.Time) {
	w.id = id
	key := keyString(prefix, id)
	v, out, err := sys.do(ctx, key, w.fn, withOutcome)
	end := time.Now()
	w.lat.record(end.Sub(start))
	w.calls.Add(1)
	w.outs[out]++
	if err != nil {
		w.errors++
		w.lastErr = err
		return
	}
	if out == deduped {
		return // the system returns no result for a key that ran already
	}
	if v.Amount != 4200 || !isKeyString(v.ID, "rcpt-", id) {
		w.wrong++
		w.lastErr = fmt.Errorf("key %s: wrong result %+v", key, v)
		return
	}
	slot := w.tr.slot(id)
	if !slot.ok.Load() {
		slot.ok.Store(true)
	}
	if out == joined || (w.settleAny && out == replayed) {
		owner := slot.owner.Load()
		if done := slot.doneAt.Load(); done > 0 {
			w.recordSettle(end.Sub(epoch)-time.Duration(done), owner)
		}
	}
}

// run is one scenario on one system.
type run struct {
	cfg      Config
	scenario string
	sys      system
	prefix   string
	tr       *tracker
	workers  []*worker
	nextID   atomic.Int64
	maxID    int64 // ids below it may have been used (for the checks)
	progress io.Writer
	meter    *redisMeter // on Redis: the server's CPU
	// What the measured windows add up to: one window, or one per round
	// when the systems of a scenario alternate (the tx scenarios).
	elapsed    time.Duration
	mallocs    uint64
	allocBytes uint64
	roundCalls int64     // calls counted by the windows so far
	roundRates []float64 // calls per second of each window
	// The store calls made before the first window kept: a warm-up's.
	tripsBefore, opsBefore int64
}

func (r *run) newWorker(work time.Duration) *worker {
	w := newWorker(r.tr, work)
	w.rng = rand.New(rand.NewPCG(uint64(len(r.workers)), uint64(time.Now().UnixNano())))
	r.workers = append(r.workers, w)
	return w
}

// setupWorkers creates the scenario's workers.
func (r *run) setupWorkers() {
	n, work := r.cfg.Concurrency, r.cfg.Work
	switch r.scenario {
	case "slow":
		work = r.cfg.SlowWork
	case "storm":
		n, work = r.cfg.StormSize, r.cfg.StormWork
	case "xstorm":
		n, work = r.cfg.XStormSize, r.cfg.StormWork
	}
	insts := 1
	if m, ok := r.sys.(*multiSystem); ok {
		insts = len(m.insts)
	}
	for i := range n {
		w := r.newWorker(work)
		if r.scenario == "xstorm" {
			w.settleAny, w.inst = true, int32(i%insts)
		}
	}
}

// execute runs the scenario for the configured duration and returns its
// result.
func (r *run) execute(ctx context.Context) (Result, error) {
	// The harness's own setup (workers, progress, the Redis meter's INFO)
	// comes before the allocations window opens.
	r.setupWorkers()
	r.meter.start(ctx)
	if err := r.measure(ctx, r.cfg.Duration); err != nil {
		return Result{}, err
	}
	res := r.result()
	res.RedisCPU = r.meter.stop(ctx, res.Calls)
	return res, nil
}

// measure runs the scenario's callers for d (one window), and adds its
// time, allocations and calls to the run's. A run measured in rounds
// (runAlternating) calls it once per round, with the same workers and
// keys: unique keys go on where the last round stopped, and a mix that
// repeats keys finds those earlier rounds completed.
func (r *run) measure(ctx context.Context, d time.Duration) error {
	stopProgress := r.startProgress()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	deadline := start.Add(d)
	switch keyMix(r.scenario) {
	case "unique":
		r.unique(ctx, deadline)
	case "replay":
		start = r.replay(ctx, &before)
	case "zipf":
		r.zipf(ctx, deadline)
	case "slow":
		r.slow(ctx, deadline)
	case "storm":
		r.storm(ctx, deadline)
	case "xstorm":
		r.xstorm(ctx, deadline)
	default:
		stopProgress()
		return fmt.Errorf("unknown scenario %q", r.scenario)
	}
	elapsed := time.Since(start)
	stopProgress()
	runtime.ReadMemStats(&after)
	r.maxID = r.nextID.Load()
	var calls int64
	for _, w := range r.workers {
		calls += w.calls.Load()
	}
	r.elapsed += elapsed
	r.mallocs += after.Mallocs - before.Mallocs
	r.allocBytes += after.TotalAlloc - before.TotalAlloc
	r.roundRates = append(r.roundRates, float64(calls-r.roundCalls)/elapsed.Seconds())
	r.roundCalls = calls
	return nil
}

// The scenarios' callers call until the deadline, and at least once, as
// the storms run at least one round: a run always has calls to measure,
// however late a loaded machine starts its callers.

// unique calls a new key every time, until deadline.
func (r *run) unique(ctx context.Context, deadline time.Time) {
	r.parallel(r.cfg.Concurrency, r.cfg.Work, func(w *worker, rng *rand.Rand) {
		for first := true; first || time.Now().Before(deadline); first = false {
			w.call(ctx, r.sys, r.prefix, r.nextID.Add(1), false, time.Now())
		}
	})
}

// replay stores every key once (not measured), then replays random ones
// for the configured duration. It returns when the replays started, and
// sets before to the memory statistics of then.
func (r *run) replay(ctx context.Context, before *runtime.MemStats) (start time.Time) {
	cfg := r.cfg
	r.parallel(cfg.Concurrency, cfg.Work, func(w *worker, rng *rand.Rand) {
		for id := r.nextID.Add(1); id <= int64(cfg.Keys); id = r.nextID.Add(1) {
			w.call(ctx, r.sys, r.prefix, id, false, time.Now())
		}
	})
	r.resetMeasurements()
	r.meter.start(ctx)
	runtime.GC()
	runtime.ReadMemStats(before)
	start = time.Now()
	deadline := start.Add(cfg.Duration)
	r.parallel(cfg.Concurrency, cfg.Work, func(w *worker, rng *rand.Rand) {
		for first := true; first || time.Now().Before(deadline); first = false {
			w.call(ctx, r.sys, r.prefix, 1+rng.Int64N(int64(cfg.Keys)), false, time.Now())
		}
	})
	return start
}

// zipf calls keys drawn from -keys, skewed by -dist, until deadline: new,
// in flight and completed ones mixed.
func (r *run) zipf(ctx context.Context, deadline time.Time) {
	cfg := r.cfg
	r.parallel(cfg.Concurrency, cfg.Work, func(w *worker, rng *rand.Rand) {
		z := rand.NewZipf(rng, 1.1, 1, uint64(cfg.Keys-1))
		for first := true; first || time.Now().Before(deadline); first = false {
			id := 1 + rng.Int64N(int64(cfg.Keys))
			if cfg.Dist == "zipf" {
				id = 1 + int64(z.Uint64())
			}
			w.call(ctx, r.sys, r.prefix, id, true, time.Now())
		}
	})
}

// slow calls a slow function until deadline, a -dup share of the calls
// with a recent key, likely still in flight.
func (r *run) slow(ctx context.Context, deadline time.Time) {
	cfg := r.cfg
	var last atomic.Int64
	r.parallel(cfg.Concurrency, cfg.SlowWork, func(w *worker, rng *rand.Rand) {
		for first := true; first || time.Now().Before(deadline); first = false {
			l := last.Load()
			var id int64
			if l > 0 && rng.Float64() < cfg.DupRatio {
				id = l - rng.Int64N(min(int64(cfg.Concurrency/2+1), l)) // recent: likely in flight
			} else {
				id = r.nextID.Add(1)
				last.Store(id)
			}
			w.call(ctx, r.sys, r.prefix, id, true, time.Now())
		}
	})
}

// storm releases -storm callers at once on one new key, round after round
// until deadline (at least one round).
func (r *run) storm(ctx context.Context, deadline time.Time) {
	ws := r.workers
	for rounds := 0; rounds == 0 || time.Now().Before(deadline); rounds++ {
		id := r.nextID.Add(1)
		release := make(chan struct{})
		var wg sync.WaitGroup
		var t0 time.Time
		for _, w := range ws {
			wg.Go(func() {
				<-release
				w.call(ctx, r.sys, r.prefix, id, true, t0)
			})
		}
		runtime.Gosched()
		t0 = time.Now()
		close(release)
		wg.Wait()
	}
}

// parallel runs n workers with body until each returns.
func (r *run) parallel(n int, work time.Duration, body func(*worker, *rand.Rand)) {
	if len(r.workers) == 0 {
		for range n {
			r.newWorker(work)
		}
	}
	var wg sync.WaitGroup
	for _, w := range r.workers {
		wg.Go(func() { body(w, w.rng) })
	}
	wg.Wait()
}

// forgetWindows drops what the windows measured so far recorded (not
// the executions): they were a warm-up.
func (r *run) forgetWindows() {
	r.resetMeasurements()
	r.elapsed, r.mallocs, r.allocBytes, r.roundCalls, r.roundRates = 0, 0, 0, 0, nil
	r.tripsBefore, r.opsBefore = r.sys.storeCalls()
}

// resetMeasurements drops what the warm-up recorded (not the executions).
func (r *run) resetMeasurements() {
	for _, w := range r.workers {
		w.lat, w.settle, w.settleOther, w.settleSame = hist{}, hist{}, hist{}, hist{}
		w.calls.Store(0)
		w.errors, w.wrong, w.outs, w.lastErr, w.negSettle = 0, 0, [numOutcomes]int64{}, nil, 0
	}
}

func (r *run) startProgress() func() {
	if r.progress == nil {
		return func() {}
	}
	done := make(chan struct{})
	stopped := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(stopped)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				fmt.Fprintf(r.progress, "\r\033[K")
				return
			case <-tick.C:
				var calls int64
				for _, w := range r.workers {
					calls += w.calls.Load()
				}
				el := time.Since(start).Seconds()
				fmt.Fprintf(r.progress, "\r\033[K  %-7s %-17s %7s %13s calls %9s",
					r.scenario, r.sys.name(), micros(el*1e6), count(calls), rate(float64(calls)/el))
			}
		}
	}()
	return func() { close(done); <-stopped }
}

// result sums the workers' measurements over the run's windows and checks
// every key ran once.
func (r *run) result() Result {
	elapsed := r.elapsed
	var lat, settle, other, same hist
	res := Result{Scenario: r.scenario, System: r.sys.name(), Store: r.cfg.Store, Seconds: elapsed.Seconds(),
		Outcomes: map[string]int64{}}
	for _, w := range r.workers {
		lat.merge(&w.lat)
		settle.merge(&w.settle)
		other.merge(&w.settleOther)
		same.merge(&w.settleSame)
		res.Calls += w.calls.Load()
		res.Errors += w.errors
		res.WrongResults += w.wrong
		res.NegativeSettles += w.negSettle
		if w.lastErr != nil && res.FirstError == "" {
			res.FirstError = w.lastErr.Error()
		}
		for o, n := range w.outs {
			if n > 0 && outcome(o) != noOutcome {
				res.Outcomes[outcome(o).String()] += n
			}
		}
	}
	res.Throughput = float64(res.Calls) / elapsed.Seconds()
	res.Latency, res.Settle = lat.summary(), settle.summary()
	if r.scenario == "xstorm" {
		o, sm := other.summary(), same.summary()
		res.SettleOther, res.SettleSame = &o, &sm
	}
	limit := r.maxID
	if mix := keyMix(r.scenario); mix == "replay" || mix == "zipf" {
		limit = max(limit, int64(r.cfg.Keys))
	}
	for id := int64(1); id <= limit; id++ {
		slot := r.tr.slot(id)
		n := int64(slot.execs.Load())
		if slot.ok.Load() {
			res.KeysCompleted++
		}
		res.Executions += n
		if n > 1 {
			res.RanTwiceCount++
			if len(res.RanTwice) < 20 {
				res.RanTwice = append(res.RanTwice, r.prefix+strconv.FormatInt(id, 10))
			}
		}
	}
	res.StoreRoundTrips, res.StoreOps = r.sys.storeCalls()
	res.StoreRoundTrips -= r.tripsBefore
	res.StoreOps -= r.opsBefore
	if res.Calls > 0 {
		res.AllocsPerOp = float64(r.mallocs) / float64(res.Calls)
		res.BytesPerOp = float64(r.allocBytes) / float64(res.Calls)
	}
	if len(r.roundRates) > 1 {
		res.RoundThroughputs = r.roundRates
	}
	return res
}
