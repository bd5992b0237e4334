package storetest

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemrt/idem/store"
)

// LinearOptions tunes [Linearizable]. The zero value is valid.
type LinearOptions struct {
	// Clients is how many goroutines call the store at once. Default: 4.
	Clients int
	// Keys is how many keys they share. Default: 3.
	Keys int
	// Ops is how many operations each client makes per history (at least:
	// see Fault). Default: 40.
	Ops int
	// Histories is how many histories are recorded and checked, each on a
	// new store from Harness.New. Default: 5.
	Histories int
	// Seed is the seed of the first history; history i uses Seed+i. A seed
	// fixes every client's choices, not the interleaving. Default: 1.
	Seed uint64
	// Think is a pause between a client's operations. Default: none.
	Think time.Duration
	// Ticks is how many times the clock advances during a history, when
	// Harness.Exact is set. Default: 8.
	Ticks int
	// OpTimeout bounds each call. Default: 5s.
	OpTimeout time.Duration
	// Indefinite reports whether an error other than the contract's leaves
	// the call's outcome unknown (a timeout, a lost connection); such calls
	// are recorded as possibly applied. An error it rejects fails the test.
	// Default: nil, every such error fails the test.
	Indefinite func(err error) bool
	// Fault, when set, runs in its own goroutine during every history (e.g.
	// pause and resume the server); it reports problems with t.Error, not
	// t.Fatal. Clients keep calling while it runs, and make at least Ops/4
	// more calls each after it returns.
	Fault func(t testing.TB)
	// CheckTimeout bounds porcupine's check of one history. Default: 30s.
	CheckTimeout time.Duration

	vizDir string // where a failure's visualisation goes; default: a new temporary directory
}

// LinearStats reports what [Linearizable] checked.
type LinearStats struct {
	Histories int
	Ops       int           // store calls recorded, over all histories
	Unknown   int           // calls whose outcome was unknown
	Check     time.Duration // time spent in porcupine
}

// Linearizable records concurrent histories of random operations from
// several clients on a few keys, and checks each with porcupine against
// [LinearModel]. Clients claim with fresh owners or replay their own, and
// complete, release and renew with the tokens they hold, with other clients'
// (often stale) tokens and with forged ones. With h.Exact, a clock goroutine
// advances the store's fake clock during the history and leases and TTLs are
// short enough to end; otherwise every lease and TTL outlives the history.
//
// On a violation it fails the test with the seed, the paths of porcupine's
// visualisations, and the calls of the offending key cut to the shortest
// history that still fails.
func Linearizable(t *testing.T, h Harness, o LinearOptions) LinearStats {
	t.Helper()
	if h.New == nil || h.Unit <= 0 || (h.Exact && h.Advance == nil) {
		t.Fatal("storetest: Linearizable needs Harness.New, a positive Unit, and Advance when Exact")
	}
	o.defaults()
	var total LinearStats
	for i := range o.Histories {
		seed := o.Seed + uint64(i)
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			st := linearRun(t, h, o, seed)
			total.Histories++
			total.Ops += st.Ops
			total.Unknown += st.Unknown
			total.Check += st.Check
		})
	}
	t.Logf("%d histories, %d calls (%d of unknown outcome), %v in porcupine", total.Histories, total.Ops, total.Unknown, total.Check)
	return total
}

func (o *LinearOptions) defaults() {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&o.Clients, 4)
	def(&o.Keys, 3)
	def(&o.Ops, 40)
	def(&o.Histories, 5)
	def(&o.Ticks, 8)
	if o.Seed == 0 {
		o.Seed = 1
	}
	if o.OpTimeout <= 0 {
		o.OpTimeout = 5 * time.Second
	}
	if o.CheckTimeout <= 0 {
		o.CheckTimeout = 30 * time.Second
	}
}

// recorder collects one history.
type recorder struct {
	t      testing.TB
	start  time.Time
	mu     sync.Mutex
	ops    []porcupine.Operation
	nextID int // client ids for calls of unknown outcome
	tokens map[string][]store.Token
	count  atomic.Int64
}

func (r *recorder) now() int64 { return int64(time.Since(r.start)) }

func (r *recorder) add(client int, in LinearInput, out LinearOutput, call int64) {
	ret := r.now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if out.Unknown {
		// It may take effect at any time from its call on: it returns at
		// infinity, on a row of its own in the visualisation.
		ret = math.MaxInt64
		client = r.nextID
		r.nextID++
	}
	r.ops = append(r.ops, porcupine.Operation{ClientId: client, Input: in, Call: call, Output: out, Return: ret})
	if in.Kind != 0 {
		r.count.Add(1)
	}
}

func (r *recorder) share(key string, tok store.Token) {
	r.mu.Lock()
	r.tokens[key] = append(r.tokens[key], tok)
	r.mu.Unlock()
}

func (r *recorder) anyToken(key string, rng *rand.Rand) (store.Token, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	toks := r.tokens[key]
	if len(toks) == 0 {
		return store.Token{}, false
	}
	return toks[rng.IntN(len(toks))], true
}

// linearRun records one history with seed on a new store and checks it.
func linearRun(t testing.TB, h Harness, o LinearOptions, seed uint64) LinearStats {
	st := h.New(t)
	base := time.Time{}
	if h.Exact {
		base = probeTime(t, st, h)
	}
	r := &recorder{t: t, start: time.Now(), nextID: o.Clients + 1, tokens: map[string][]store.Token{}}
	keys := make([]string, o.Keys)
	for i := range keys {
		keys[i] = fmt.Sprintf("lin:%d:k%d", seed, i)
	}
	f := startFault(t, o.Fault, r)
	var wg sync.WaitGroup
	for c := range o.Clients {
		cl := &client{id: c, h: h, o: o, r: r, base: base, keys: keys, st: st,
			rng: rand.New(rand.NewPCG(seed, uint64(c))), own: map[string]store.Token{}, pending: map[string]string{}}
		wg.Go(func() { cl.run(&f.on) })
	}
	if h.Exact {
		wg.Go(func() { linearClock(t, h, o, r, seed) })
	}
	wg.Wait()
	<-f.done
	if t.Failed() {
		return LinearStats{}
	}
	return checkHistory(t, h, o, r, seed, f.notes())
}

// fault is the run of LinearOptions.Fault during one history.
type fault struct {
	on         atomic.Bool // while it runs
	start, end int64       // by the recorder's clock
	done       chan struct{}
	ran        bool
}

// startFault runs fn, if set, in its own goroutine; done is closed when
// it returns (at once without fn).
func startFault(t testing.TB, fn func(testing.TB), r *recorder) *fault {
	f := &fault{done: make(chan struct{}), ran: fn != nil}
	if fn == nil {
		close(f.done)
		return f
	}
	f.on.Store(true)
	go func() {
		defer close(f.done)
		defer f.on.Store(false)
		f.start = r.now()
		fn(t)
		f.end = r.now()
	}()
	return f
}

// notes marks the fault's time in porcupine's visualisation.
func (f *fault) notes() []porcupine.Annotation {
	if !f.ran {
		return nil
	}
	return []porcupine.Annotation{{Tag: "fault", Start: f.start, End: f.end, Description: "fault"}}
}

// checkHistory checks r's history with porcupine and fails the test with an
// explanation when it is not linearizable.
func checkHistory(t testing.TB, h Harness, o LinearOptions, r *recorder, seed uint64, notes []porcupine.Annotation) LinearStats {
	stats := LinearStats{Histories: 1, Ops: int(r.count.Load())}
	for _, op := range r.ops {
		if op.Output.(LinearOutput).Unknown {
			stats.Unknown++
		}
	}
	// A record's life (ExpiresAt-CreatedAt) may differ from its TTL by a
	// server's turn: Redis stamps CreatedAt by TIME but expires by the time
	// its command started (seen 10ms apart on a loaded machine).
	model := LinearModel(h.Exact, long*h.Unit, h.Unit)
	began := time.Now()
	res := porcupine.CheckOperationsTimeout(model, r.ops, o.CheckTimeout)
	stats.Check = time.Since(began)
	switch res {
	case porcupine.Unknown:
		t.Fatalf("seed %d: porcupine found no answer within %v for %d calls; make the histories smaller", seed, o.CheckTimeout, len(r.ops))
	case porcupine.Illegal:
		t.Fatalf("seed %d: the history is not linearizable.\n%s", seed, explain(model, r.ops, notes, o.vizDir))
	}
	return stats
}

// probeTime returns the store's time at the start of a history on an exact
// clock: the CreatedAt of a record completed before the clock moves.
func probeTime(t testing.TB, st store.Store, h Harness) time.Time {
	res, err := st.Claim(ctx, "lin:probe", store.ClaimRequest{Owner: "probe", Lease: long * h.Unit, TTL: long * h.Unit})
	if err != nil || res.Status != store.Claimed {
		t.Fatalf("probe claim: %v %v", res.Status, err)
	}
	rec, err := st.Complete(ctx, "lin:probe", res.Token, store.Record{}, long*h.Unit)
	if err != nil {
		t.Fatalf("probe complete: %v", err)
	}
	return rec.CreatedAt
}

// linearClock advances the clock Ticks times, spread over the history by
// the number of calls made so far.
func linearClock(t testing.TB, h Harness, o LinearOptions, r *recorder, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, math.MaxUint32))
	total := int64(o.Clients * o.Ops)
	steps := []time.Duration{h.Unit / 2, h.Unit, 2 * h.Unit}
	for i := range o.Ticks {
		for r.count.Load() < total*int64(i+1)/int64(o.Ticks+1) {
			if t.Failed() { // the clients stopped
				return
			}
			runtime.Gosched()
		}
		d := steps[rng.IntN(len(steps))]
		call := r.now()
		h.Advance(t, d)
		r.add(o.Clients, LinearInput{Advance: d}, LinearOutput{}, call)
	}
}
