package idem_test

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

var (
	simSeedFlag   = flag.Uint64("seed", 0, "TestSim: replay this seed only (see sim_test.go)")
	simIterFlag   = flag.Int("sim.iterations", 0, "TestSim: run this many random seeds instead of the fixed set")
	simTraceFlag  = flag.Bool("sim.trace", false, "TestSim: print the schedule of every seed")
	simIgnoreFlag = flag.String("sim.ignore", "", "TestSim: comma-separated invariants to log but not fail on (e.g. reuse,claimfp)")
)

// simSeeds is how many fixed seeds TestSim runs by default.
const simSeeds = 32

// TestSim is a deterministic simulation of several runtimes sharing one
// store, looking for schedules that break "once".
//
// Each seed builds a world: 3 to 5 runtimes (idem.New with 1 or 2 shards)
// over one shared memstore and one clock.Fake, each runtime behind its own
// wrapper store (sim_store_test.go) that records what the store applied and
// injects faults: errors before applying, slow requests and answers,
// timeouts, and answers lost after the store applied the operation. Half of
// the seeds wrap with store.InProcess (the inline path: operations run on
// the shards' goroutines), half of those with store.OwnerCompleter as well
// (owners complete their keys themselves and claim them on their own
// goroutines, as with memstore: actors/direct.go), half without (the
// batched path Redis takes). A seeded
// schedule (sim_world_test.go) makes calls of 2 to 4 keys on different
// runtimes, with and without fingerprints, with settle times of 0, short
// and long, mixed leases, WithoutRenewal, and contexts that are cancelled
// or have (fake-time) deadlines. The functions block until the schedule
// tells them to return a value, a transient or a permanent error, or to
// panic; some ignore their context and outlive their lease. The schedule
// also forgets keys, closes runtimes (and starts new ones in their place),
// calls Close again with a deadline, and moves the clock in steps of a
// tenth of the smallest lease. In a quarter of the seeds (the eviction
// mode, sim_evict_test.go) the store holds only 64 to 256 records and
// filler keys claimed every step keep it full, so that it evicts results
// and abandoned claims of the simulated keys; an evicted result counts as
// forgotten, and a live claim must never be evicted (evictlive). Over a set
// of seeds, the test fails if eviction-mode seeds ran and nothing of the
// simulated keys was evicted.
//
// After every action and every timer the simulation waits until nothing in
// the process moves (sim_quiet_test.go), so each happens at its own instant
// and in its own turn; then it checks the invariants (sim_check_test.go,
// listed on simWorld.check) against the log of what every runtime, function
// and store operation did. At the end it lets every function return, waits
// for the world to come to rest (every call answered, Stats zero on every
// runtime), closes the runtimes and checks that no goroutine is left.
//
// Flags (of this package's test binary):
//
//	-seed N              replay seed N only: go test -race -run 'TestSim$' -seed N .
//	-v                   with -seed: print the seed's schedule, with what the
//	                     runtimes and the store did, step by step
//	-sim.iterations N    run N random seeds instead of the fixed set
//	-sim.trace           print the schedule of every seed run (large)
//	-sim.ignore a,b      log the named invariants (the word before the ":" in
//	                     a report: reuse, leaseshort, lapse, twoholders, ...)
//	                     but do not fail on them, to see what else a seed
//	                     breaks
//
// Without flags (as in `make test`) it runs the fixed seeds 1 to simSeeds
// (8 with -short); a failing seed prints the command that replays it.
// Store faults and lost wake-ups are decided from a hash of (seed, runtime,
// key, operation kind, per-key count of that operation), not from the global
// order of operations, and the schedule draws from the seed's generator only
// when the world is quiet, so a seed replays the same way however goroutines
// interleave. The exception, on purpose: a third of the functions are told
// to return from inside their runtime's next timer callback, racing what the
// timer sets off (a renewal, a settle time), as they can in production;
// a seed that fails through such a race may need a few replays.
func TestSim(t *testing.T) {
	var seeds []uint64
	switch {
	case *simSeedFlag != 0:
		seeds = []uint64{*simSeedFlag}
	case *simIterFlag > 0:
		for range *simIterFlag {
			seeds = append(seeds, rand.Uint64()>>1|1)
		}
	default:
		n := simSeeds
		if testing.Short() {
			n = 8
		}
		for i := 1; i <= n; i++ {
			seeds = append(seeds, uint64(i))
		}
	}
	var evicting, evicted, evictedSim int64
	for _, seed := range seeds {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			w := runSim(t, seed)
			if w.cfg.maxRecords > 0 {
				evicting++
				evicted += w.mem.Evicted()
				evictedSim += int64(w.evictedSim)
			}
		})
	}
	t.Logf("eviction mode: %d of %d seeds, %d records evicted, %d of them the simulated keys' results or claims", evicting, len(seeds), evicted, evictedSim)
	// The eviction mode must evict, or it checks nothing.
	if evicting > 0 && (evicted == 0 || (len(seeds) > 1 && evictedSim == 0)) && !t.Failed() {
		t.Errorf("%d seeds ran in eviction mode, but the store evicted %d records, %d of them the simulated keys': the filler no longer fills the store", evicting, evicted, evictedSim)
	}
}

// runSim runs one seed's world and returns it.
func runSim(t *testing.T, seed uint64) *simWorld {
	leakOpts := []goleak.Option{goleak.IgnoreCurrent()}
	w := newSimWorld(t, seed)
	begin := time.Now()
	w.run()
	trace := (*simSeedFlag != 0 && testing.Verbose()) || *simTraceFlag
	if trace {
		t.Logf("schedule of seed %d:\n%s", seed, strings.Join(w.logLines, "\n"))
	}
	if vs := w.violationList(); len(vs) > 0 {
		if !trace {
			tail := w.logLines
			if len(tail) > 120 {
				tail = tail[len(tail)-120:]
			}
			t.Logf("the end of the schedule of seed %d:\n%s", seed, strings.Join(tail, "\n"))
		}
		t.Errorf("seed %d (%s) broke %d invariant(s):\n  %s\nreplay: go test -race -run 'TestSim$' -seed %d -v .",
			seed, w.cfg, len(vs), strings.Join(vs, "\n  "), seed)
		return w
	}
	if err := goleak.Find(leakOpts...); err != nil {
		t.Errorf("seed %d: goroutines left after every runtime closed: %v\nreplay: go test -race -run 'TestSim$' -seed %d -v .", seed, err, seed)
	}
	if testing.Verbose() {
		t.Logf("seed %d (%s): %d steps, %d calls, %d executions, %d faults, %d evictions (%d of the simulated keys', %d of them claims), %v",
			seed, w.cfg, w.stepsRun, len(w.calls), len(w.execs), len(w.faults), w.mem.Evicted(), w.evictedSim, w.evictedClaims, time.Since(begin).Round(time.Millisecond))
	}
	return w
}

// simConfig is the shape of one seed's world.
type simConfig struct {
	runtimes int
	shards   int
	inline   bool
	owners   bool // inline, and owners complete their keys (the direct path)
	keys     int
	leases   []time.Duration // WithLease values, and the runtimes' Lease
	step     time.Duration
	steps    int
	faults   int // per mille of store operations that fail (0 in a quarter of the seeds)
	dropWake int // per mille of wake-ups lost

	// The eviction mode (sim_evict_test.go), in a quarter of the seeds.
	maxRecords int // memstore's MaxRecords; 0: the default, no eviction mode
	fill       int // the most filler keys claimed per step
}

func (c simConfig) String() string {
	path := "batched"
	switch {
	case c.inline && c.owners:
		path = "inline, owners complete"
	case c.inline:
		path = "inline"
	}
	s := fmt.Sprintf("%d runtimes, %d shard(s), %s, %d keys, leases %v, step %v, faults %d‰, lost wake-ups %d‰",
		c.runtimes, c.shards, path, c.keys, c.leases, c.step, c.faults, c.dropWake)
	if c.maxRecords > 0 {
		s += fmt.Sprintf(", evicting: max %d records, up to %d filler keys a step", c.maxRecords, c.fill)
	}
	return s
}

func simConfigFor(rng *rand.Rand) simConfig {
	c := simConfig{
		runtimes: 3 + rng.IntN(3),
		shards:   1 + rng.IntN(2),
		inline:   rng.IntN(2) == 0,
		owners:   rng.IntN(2) == 0,
		keys:     2 + rng.IntN(3),
		steps:    250,
	}
	pool := []time.Duration{time.Second, 1500 * time.Millisecond, 2 * time.Second, 4 * time.Second}
	rng.Shuffle(len(pool), func(i, j int) { pool[i], pool[j] = pool[j], pool[i] })
	c.leases = pool[:2+rng.IntN(3)]
	least := c.leases[0]
	for _, l := range c.leases {
		least = min(least, l)
	}
	c.step = least / 10
	switch rng.IntN(4) {
	case 0:
	case 1:
		c.faults = 20
	case 2:
		c.faults = 80
	default:
		c.faults = 150
	}
	if rng.IntN(2) == 0 {
		c.dropWake = 200
	}
	return c
}

// run plays the seed's schedule, then winds the world down and checks that
// it came to rest.
func (w *simWorld) run() {
	w.logf("config: %s", w.cfg)
	for i := range w.cfg.runtimes {
		w.slots = append(w.slots, w.newRT(i))
	}
	for step := 0; step < w.cfg.steps && !w.failed() && !w.tooSlow(); step++ {
		w.stepsRun++
		w.act()
		w.settle()
		w.advance()
		w.settle()
	}
	w.teardown()
}

// settle waits until the world is quiet, then checks the invariants.
func (w *simWorld) settle() {
	w.quiesce()
	w.check()
}

// act draws this step's actions from the seed's generator.
func (w *simWorld) act() {
	w.fill()
	rng := w.rng
	// Running functions return (now, or racing the next timer of their
	// runtime: see tell).
	for _, x := range w.runningExecs() {
		if x.told || rng.IntN(1000) >= 90 {
			continue
		}
		var a simAct
		switch r := rng.IntN(100); {
		case r < 50:
			a = actValue
		case r < 80:
			a = actTransient
		case r < 90:
			a = actPermanent
		default:
			a = actPanic
		}
		w.tell(x, a, rng.IntN(3) == 0)
		w.quiesce()
	}
	// New calls.
	n := 0
	switch r := rng.IntN(100); {
	case r < 40:
		n = 1
	case r < 55:
		n = 2
	case r < 58:
		n = 5
	}
	for range n {
		w.newCall()
		w.quiesce()
	}
	// Callers give up.
	for _, c := range w.cancellable() {
		if rng.IntN(1000) < 25 {
			w.cancelCall(c)
			w.quiesce()
		}
	}
	if rng.IntN(100) < 5 {
		w.forget(w.slots[rng.IntN(len(w.slots))], w.keyName(rng.IntN(w.cfg.keys)))
		w.quiesce()
	}
	if rng.IntN(1000) < 8 {
		w.closeSlot(rng.IntN(len(w.slots)))
		w.quiesce()
	}
	for _, cl := range w.openClosers() {
		switch r := rng.IntN(1000); {
		case r < 30 && cl.ctx != nil:
			w.cancelClose(cl)
		case r < 40:
			w.closeAgain(cl.rt)
		}
		w.quiesce()
	}
	if rng.IntN(100) < 2 {
		w.wakeAll(w.slots[rng.IntN(len(w.slots))])
	}
}
