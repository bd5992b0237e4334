package idem_test

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// simEpoch is where the simulation's fake clock starts: far enough ahead of
// the real clock that a fake-time deadline given to a context (which the
// runtime turns into a real timer) never fires by itself.
var simEpoch = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC)

// simWorld is one seed's simulation: the runtimes, the shared store, and the
// log of everything that happened, which the invariants are checked against.
type simWorld struct {
	t     *testing.T
	seed  uint64
	cfg   simConfig
	rng   *rand.Rand // the schedule's; used by the simulation's goroutine only
	clock *clock.Fake

	mem   *memstore.Store
	began time.Time // real time, for the seed's time budget

	// The eviction mode (sim_evict_test.go).
	storeMu    sync.Mutex // held by each store operation, so that what it evicted is known
	fillRng    *rand.Rand // the filler's; used by the simulation's goroutine only
	fillN      int        // filler keys claimed
	evictedSim int        // results and claims of the simulation's keys found evicted (under mu)
	// How many of evictedSim were claims (abandoned ones, unless evictlive
	// or evictearly says otherwise).
	evictedClaims int

	progress  atomic.Int64 // bumped by everything the simulation sees happen
	busy      atomic.Int64 // store operations being applied (not those waiting out a delay)
	faultsOff atomic.Bool

	stepsRun int
	slots    []*simRT // the runtime in each slot (owned by the simulation's goroutine)

	mu         sync.Mutex
	seq        int64 // orders what happens at one instant
	rts        []*simRT
	calls      []*simCall
	execs      []*simExec
	execByID   map[string]*simExec
	execN      map[string]int
	tokens     map[uint64]*simToken
	lastTok    map[string]*simToken // per key, the claim the store granted last
	records    map[string][]*simRecord
	recByExec  map[string]*simRecord
	faults     []simFaultRec
	lapses     []simLapse
	renewalsNR []simRenewal // renewals applied to a token whose execution has no renewal
	// How many lapses and renewalsNR the checks have seen.
	lapsesSeen, renewalsSeen int
	closers                  []*simCloser
	forgets                  []*simForget
	wakes                    []simWake // wake-ups the store sent, delivered one at a time by quiesce
	racy                     []simRacy // tells to deliver inside a runtime's next timer callback
	reported                 map[string]bool

	logMu      sync.Mutex
	logLines   []string
	violations []string
}

// simRT is one runtime (one incarnation of a slot).
type simRT struct {
	slot, inc int
	name      string
	rt        *idem.Runtime
	lease     time.Duration // Options.Lease
	settle    time.Duration // Options.Settle

	// Guarded by simWorld.mu.
	claimed map[string]store.Token // the last Claimed answer delivered, per key
	opN     map[string]int         // operations per key and kind, for fault decisions
	wakeN   map[string]int
	wakeFn  func(string)
	closing bool
	closeAt time.Time
	forgot  map[string][]int64 // when (w.seq) a Forget of the key returned nil
}

type simCall struct {
	id       int
	rt       *simRT
	key      string
	fp       string // "" (none), "A" or "B"
	lease    time.Duration
	noRenew  bool
	settle   time.Duration
	ttl      time.Duration
	ctx      *simCtx // nil: context.Background()
	obedient bool    // returns when its context ends
	start    time.Time
	startSeq int64
	cancelAt time.Time // when its context ended
	execs    []*simExec

	done    bool
	end     time.Time
	val     simVal
	err     error
	out     idem.Outcome
	checked bool
}

func (c *simCall) String() string {
	s := fmt.Sprintf("call %d (%s on %s", c.id, c.key, c.rt.name)
	if c.fp != "" {
		s += ", fp " + c.fp
	}
	s += fmt.Sprintf(", lease %v", c.lease)
	if c.noRenew {
		s += " without renewal"
	}
	s += fmt.Sprintf(", settle %v, ttl %v", c.settle, c.ttl)
	switch {
	case c.ctx == nil:
		s += ", background ctx"
	case !c.ctx.deadline.IsZero():
		s += fmt.Sprintf(", deadline +%v", c.ctx.deadline.Sub(c.start))
	default:
		s += ", cancellable ctx"
	}
	if !c.obedient {
		s += ", ignores ctx"
	}
	return s + ")"
}

// simExec is one run of a function.
type simExec struct {
	id       string // key.n
	call     *simCall
	tok      store.Token
	start    time.Time
	startSeq int64
	act      chan simAct
	told     bool

	tokKnown   bool      // a Claimed answer for the key was delivered to its runtime
	leaseAt0   time.Time // its token's store lease end when it started
	endedAt0   bool      // its token was released or completed when it started
	reusedFrom string    // an execution that ran under the same token before

	running bool
	end     time.Time
	how     string
	stopAt  time.Time // when its context ended
	cause   error
	lease0  time.Time // its token's store lease end when its context ended
	checked bool

	stopChecked bool
	endChecked  bool
	leaseAtEnd  time.Time // its token's store lease end when it returned (zero if released or completed)
}

// simToken is one claim the store granted.
type simToken struct {
	tok       store.Token
	key       string
	rt        *simRT
	lease     time.Duration
	ttl       time.Duration // the TTL it was claimed with
	fp        string
	applied   time.Time
	delivered time.Time // zero while (or if) the Claimed answer did not reach the runtime
	leaseEnd  time.Time
	ended     bool // released, completed or evicted
	endedAt   time.Time
	evicted   bool
	execs     []*simExec
}

// simRecord is a result the store accepted.
type simRecord struct {
	key       string
	tok       store.Token
	exec      string
	failed    bool
	fp        string
	created   time.Time
	seq       int64 // w.seq when the store accepted it
	expires   time.Time
	forgotten time.Time // when a Forget or an eviction removed it
	evicted   bool
}

func (r *simRecord) liveAt(at time.Time) bool {
	return !at.Before(r.created) && at.Before(r.expires) && (r.forgotten.IsZero() || at.Before(r.forgotten))
}

type simFaultRec struct {
	rt       *simRT
	from, to time.Time
	what     string
}

// simLapse is a store lease that ended and was renewed later (a Renew of
// an expired claim nobody took over).
type simLapse struct {
	tok      *simToken
	from, to time.Time
}

type simRacy struct {
	x *simExec
	a simAct
}

type simWake struct {
	rt  *simRT
	key string
	fn  func(string)
}

type simRenewal struct {
	tok  *simToken
	at   time.Time
	exec *simExec
}

type simCloser struct {
	rt       *simRT
	ctx      *simCtx // nil: context.Background()
	second   bool
	start    time.Time
	cancelAt time.Time
	done     bool
	end      time.Time
	err      error
	checked  bool
}

type simForget struct {
	rt      *simRT
	key     string
	start   time.Time
	done    bool
	end     time.Time
	endSeq  int64
	err     error
	checked bool
}

type simAct uint8

const (
	actValue simAct = iota + 1
	actTransient
	actPermanent
	actPanic
)

var simActNames = [...]string{actValue: "value", actTransient: "transient error", actPermanent: "permanent error", actPanic: "panic"}

// simVal is what a simulated function returns: it names its execution.
type simVal struct {
	Key  string `json:"k"`
	Exec string `json:"e"`
	RT   string `json:"r"`
	FP   string `json:"f"`
}

// simErr is a simulated function's error; its message names the execution.
type simErr struct {
	exec  string
	kind  string
	cause error
}

func (e *simErr) Error() string { return fmt.Sprintf("sim %s of exec[%s]", e.kind, e.exec) }
func (e *simErr) Unwrap() error { return e.cause }

// simPanic is what a simulated function panics with (not an error, so that
// a PanicError unwraps to nothing).
type simPanic string

func newSimWorld(t *testing.T, seed uint64) *simWorld {
	rng := rand.New(rand.NewPCG(seed, 0x1de3))
	w := &simWorld{
		t:         t,
		seed:      seed,
		cfg:       simConfigFor(rng),
		rng:       rng,
		clock:     clock.NewFake(simEpoch),
		began:     time.Now(),
		execByID:  make(map[string]*simExec),
		execN:     make(map[string]int),
		tokens:    make(map[uint64]*simToken),
		lastTok:   make(map[string]*simToken),
		records:   make(map[string][]*simRecord),
		recByExec: make(map[string]*simRecord),
		reported:  make(map[string]bool),
	}
	w.cfg.maxRecords, w.cfg.fill, w.fillRng = simEvictConfig(seed)
	w.mem = memstore.New(memstore.Options{Clock: w.clock, MaxRecords: w.cfg.maxRecords, WhenFull: memstore.EvictWhenFull})
	return w
}

func (w *simWorld) now() time.Time { return w.clock.Now() }

func (w *simWorld) bump() { w.progress.Add(1) }

// at formats a fake time as seconds since the start.
func (w *simWorld) at(t time.Time) string { return fmt.Sprintf("%.3fs", t.Sub(simEpoch).Seconds()) }

// logf adds a line to the schedule's log, stamped with the fake time.
func (w *simWorld) logf(format string, args ...any) {
	line := fmt.Sprintf("%8.3fs  ", w.now().Sub(simEpoch).Seconds()) + fmt.Sprintf(format, args...)
	w.logMu.Lock()
	w.logLines = append(w.logLines, line)
	w.logMu.Unlock()
}

// violate records a broken invariant, once per id (name/subject).
func (w *simWorld) violate(id, format string, args ...any) {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	if w.reported[id] {
		return
	}
	w.reported[id] = true
	name, _, _ := strings.Cut(id, "/")
	msg := fmt.Sprintf("[t=%.3fs] %s: ", w.now().Sub(simEpoch).Seconds(), name) + fmt.Sprintf(format, args...)
	if slices.Contains(strings.Split(*simIgnoreFlag, ","), name) {
		w.logLines = append(w.logLines, "VIOLATION (ignored) "+msg)
		return
	}
	w.violations = append(w.violations, msg)
	w.logLines = append(w.logLines, "VIOLATION "+msg)
}

func (w *simWorld) violationList() []string {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	return slices.Clone(w.violations)
}

func (w *simWorld) failed() bool {
	w.logMu.Lock()
	defer w.logMu.Unlock()
	return len(w.violations) > 0
}

// tooSlow reports whether the seed has used its real-time budget (a
// runtime that keeps a goroutine busy makes every quiescence wait time out).
func (w *simWorld) tooSlow() bool { return time.Since(w.began) > 90*time.Second }

func (w *simWorld) keyName(i int) string { return fmt.Sprintf("k%d", i) }

// newRT starts a runtime in slot.
func (w *simWorld) newRT(slot int) *simRT {
	w.mu.Lock()
	r := &simRT{
		slot:    slot,
		inc:     len(w.rts),
		lease:   w.cfg.leases[w.rng.IntN(len(w.cfg.leases))],
		settle:  2 * time.Second,
		claimed: make(map[string]store.Token),
		opN:     make(map[string]int),
		wakeN:   make(map[string]int),
		forgot:  make(map[string][]int64),
	}
	r.name = fmt.Sprintf("r%d", r.inc)
	w.rts = append(w.rts, r)
	w.mu.Unlock()
	base := &simStore{w: w, rt: r}
	var st store.Store = base
	switch {
	case w.cfg.inline && w.cfg.owners:
		st = simOwnerStore{simInlineStore{base}}
	case w.cfg.inline:
		st = simInlineStore{base}
	}
	rt, err := idem.New(idem.Options{
		Store:  st,
		Clock:  simClock{w, r},
		Shards: w.cfg.shards,
		Policy: idem.Policy{Lease: r.lease, TTL: time.Hour, Settle: r.settle},
		Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		w.t.Fatalf("idem.New: %v", err)
	}
	r.rt = rt
	w.logf("start %s in slot %d (lease %v)", r.name, slot, r.lease)
	return r
}

// newCall draws a call and starts it on its own goroutine.
func (w *simWorld) newCall() {
	rng := w.rng
	now := w.now()
	r := w.slots[rng.IntN(len(w.slots))]
	key := w.keyName(rng.IntN(w.cfg.keys))
	if running := w.runningExecs(); len(running) > 0 && rng.IntN(100) < 30 {
		// Often collide with a run in flight, in the same runtime, so
		// that waiters are handed the key.
		x := running[rng.IntN(len(running))]
		key = x.call.key
		for _, s := range w.slots {
			if s == x.call.rt {
				r = s
			}
		}
	}
	c := &simCall{rt: r, key: key, start: now, lease: r.lease, settle: r.settle, ttl: time.Hour}
	var opts []idem.CallOption
	switch f := rng.IntN(100); {
	case f < 35:
		c.fp = "A"
	case f < 50:
		c.fp = "B"
	}
	if c.fp != "" {
		opts = append(opts, idem.WithFingerprint([]byte(c.fp)))
	}
	if rng.IntN(100) < 70 {
		c.lease = w.cfg.leases[rng.IntN(len(w.cfg.leases))]
		opts = append(opts, idem.WithLease(c.lease))
	}
	if rng.IntN(100) < 35 {
		c.noRenew = true
		opts = append(opts, idem.WithoutRenewal())
	}
	switch s := rng.IntN(100); {
	case s < 20:
		c.settle = 0
	case s < 45:
		c.settle = 300 * time.Millisecond
	case s < 90:
		c.settle = 5 * time.Second
	}
	if rng.IntN(100) < 90 {
		if c.settle == 0 {
			opts = append(opts, idem.WithFailFast())
		} else {
			opts = append(opts, idem.WithSettle(c.settle))
		}
	} else {
		c.settle = r.settle // Options.Settle
	}
	switch t := rng.IntN(100); {
	case t < 90:
		c.ttl = time.Duration(500+rng.IntN(2500)) * time.Millisecond
		opts = append(opts, idem.WithTTL(c.ttl))
	case t < 95:
		opts = append(opts, idem.WithTTL(c.ttl))
	}
	switch k := rng.IntN(100); {
	case k < 30:
	case k < 70:
		c.ctx = newSimCtx(time.Time{})
	default:
		d := time.Duration(200+rng.IntN(3800)) * time.Millisecond
		c.ctx = newSimCtx(now.Add(d))
		w.afterFunc(d, func() { w.endCall(c, context.DeadlineExceeded) })
	}
	c.obedient = rng.IntN(100) < 60
	var out idem.Outcome
	opts = append(opts, idem.WithOutcome(&out))

	w.mu.Lock()
	c.id = len(w.calls) + 1
	w.seq++
	c.startSeq = w.seq
	w.calls = append(w.calls, c)
	w.mu.Unlock()
	w.logf("%v", c)
	fn := w.fnFor(c)
	go func() {
		var ctx context.Context = context.Background()
		if c.ctx != nil {
			ctx = c.ctx
		}
		v, err := idem.Do(ctx, r.rt, key, fn, opts...)
		w.mu.Lock()
		c.done, c.end, c.val, c.err, c.out = true, w.now(), v, err, out
		w.mu.Unlock()
		if err != nil {
			w.logf("call %d returns %v: %v", c.id, out, err)
		} else {
			w.logf("call %d returns %v: value of %s", c.id, out, v.Exec)
		}
		w.bump()
	}()
}

// fnFor returns the function call c runs: it starts an execution and
// waits until the schedule says how it ends.
func (w *simWorld) fnFor(c *simCall) func(context.Context) (simVal, error) {
	return func(ctx context.Context) (simVal, error) {
		x := w.startExec(c)
		done := ctx.Done()
		for {
			select {
			case a := <-x.act:
				w.endExec(x, simActNames[a])
				switch a {
				case actValue:
					return simVal{Key: c.key, Exec: x.id, RT: c.rt.name, FP: c.fp}, nil
				case actTransient:
					return simVal{}, &simErr{exec: x.id, kind: "transient error"}
				case actPermanent:
					return simVal{}, idem.Permanent(&simErr{exec: x.id, kind: "permanent error"})
				default:
					panic(simPanic(fmt.Sprintf("sim panic of exec[%s]", x.id)))
				}
			case <-done:
				done = nil
				w.stopExec(x, context.Cause(ctx))
				if c.obedient {
					w.endExec(x, "stopped by its context")
					return simVal{}, &simErr{exec: x.id, kind: "stop", cause: ctx.Err()}
				}
			}
		}
	}
}

func (w *simWorld) startExec(c *simCall) *simExec {
	w.mu.Lock()
	now := w.now()
	w.execN[c.key]++
	x := &simExec{
		id:      fmt.Sprintf("%s.%d", c.key, w.execN[c.key]),
		call:    c,
		start:   now,
		act:     make(chan simAct, 1),
		running: true,
	}
	w.seq++
	x.startSeq = w.seq
	if tok, ok := c.rt.claimed[c.key]; ok {
		x.tok = tok
		if tk := w.tokens[tok.Fence]; tk != nil {
			x.tokKnown = true
			x.leaseAt0, x.endedAt0 = tk.leaseEnd, tk.ended
			if n := len(tk.execs); n > 0 {
				x.reusedFrom = tk.execs[n-1].id
			}
			tk.execs = append(tk.execs, x)
		}
	}
	c.execs = append(c.execs, x)
	w.execs = append(w.execs, x)
	w.execByID[x.id] = x
	w.mu.Unlock()
	w.logf("exec %s starts for call %d on %s, token %d (store lease left %v)", x.id, c.id, c.rt.name, x.tok.Fence, x.leaseAt0.Sub(now))
	w.bump()
	return x
}

func (w *simWorld) endExec(x *simExec, how string) {
	w.mu.Lock()
	x.running, x.end, x.how = false, w.now(), how
	if tk := w.tokens[x.tok.Fence]; tk != nil && x.tokKnown && !tk.ended {
		x.leaseAtEnd = tk.leaseEnd
	}
	w.mu.Unlock()
	w.logf("exec %s returns: %s", x.id, how)
	w.bump()
}

func (w *simWorld) stopExec(x *simExec, cause error) {
	w.mu.Lock()
	x.stopAt, x.cause = w.now(), cause
	if tk := w.tokens[x.tok.Fence]; tk != nil && x.tokKnown {
		x.lease0 = tk.leaseEnd
		if tk.ended {
			x.lease0 = tk.endedAt
		}
	}
	w.mu.Unlock()
	w.logf("exec %s: context ended (%v)", x.id, cause)
	w.bump()
}

// runningExecs returns the executions running, by id.
func (w *simWorld) runningExecs() []*simExec {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*simExec
	for _, x := range w.execs {
		if x.running {
			out = append(out, x)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// tell makes x return a: now, or (racy) from inside the next timer
// callback of its runtime, right after the runtime's tick is sent and
// before the world is quiet again, so that the function's return races
// what the timer sets off (a renewal, a settle time, a hard lease's end),
// as it can in production. Racy tells are the one place where a seed's
// replay depends on how goroutines interleave.
func (w *simWorld) tell(x *simExec, a simAct, racy bool) {
	w.mu.Lock()
	x.told = true
	if racy {
		w.racy = append(w.racy, simRacy{x: x, a: a})
	}
	w.mu.Unlock()
	if racy {
		w.logf("tell exec %s to return a %s with %s's next timer", x.id, simActNames[a], x.call.rt.name)
		return
	}
	w.logf("tell exec %s to return a %s", x.id, simActNames[a])
	simSend(x, a)
}

func simSend(x *simExec, a simAct) {
	select {
	case x.act <- a:
	default:
	}
}

// fireRacy delivers the racy tells of r's executions (of every runtime's
// when r is nil).
func (w *simWorld) fireRacy(r *simRT) {
	w.mu.Lock()
	var fire []simRacy
	kept := w.racy[:0]
	for _, t := range w.racy {
		if r == nil || t.x.call.rt == r {
			fire = append(fire, t)
		} else {
			kept = append(kept, t)
		}
	}
	w.racy = kept
	w.mu.Unlock()
	for _, t := range fire {
		w.logf("exec %s told to return a %s (racing a timer)", t.x.id, simActNames[t.a])
		simSend(t.x, t.a)
	}
}

// cancellable returns the calls in flight whose context can be cancelled.
func (w *simWorld) cancellable() []*simCall {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*simCall
	for _, c := range w.calls {
		if !c.done && c.ctx != nil && c.cancelAt.IsZero() {
			out = append(out, c)
		}
	}
	return out
}

func (w *simWorld) cancelCall(c *simCall) { w.endCall(c, context.Canceled) }

// endCall ends c's context with err (its deadline, or a cancellation).
func (w *simWorld) endCall(c *simCall, err error) {
	w.mu.Lock()
	ok := !c.done && c.ctx.end(err)
	if ok {
		c.cancelAt = w.now()
	}
	w.mu.Unlock()
	if ok {
		w.logf("call %d: context ends (%v)", c.id, err)
	}
}

// advance moves the clock one step. Every timer that falls due runs at its
// own instant, followed by a wait for quiescence (see afterFunc). Racy
// tells whose runtime had no timer in the step are delivered at its end.
func (w *simWorld) advance() {
	w.clock.Advance(w.cfg.step)
	w.fireRacy(nil)
}

// afterFunc runs f at d from now in fake time; once f has run (inside the
// clock's Advance, on the simulation's goroutine), it waits until the world
// is quiet again, so that what each timer sets off happens at its own
// instant and in its own turn: timers of different runtimes firing at once
// do not race.
func (w *simWorld) afterFunc(d time.Duration, f func()) clock.Timer {
	return w.clock.AfterFunc(d, func() {
		f()
		w.quiesce()
	})
}

// simClock is the clock a runtime gets: the world's fake clock, whose
// timers deliver the runtime's racy tells and then wait for quiescence
// after they fire (see afterFunc and tell).
type simClock struct {
	w *simWorld
	r *simRT
}

func (c simClock) Now() time.Time { return c.w.clock.Now() }

func (c simClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return c.w.afterFunc(d, func() {
		f()
		c.w.fireRacy(c.r)
	})
}

// forget calls Forget on its own goroutine.
func (w *simWorld) forget(r *simRT, key string) {
	f := &simForget{rt: r, key: key, start: w.now()}
	w.mu.Lock()
	w.forgets = append(w.forgets, f)
	w.mu.Unlock()
	w.logf("forget %s on %s", key, r.name)
	go func() {
		err := r.rt.Forget(context.Background(), key)
		w.mu.Lock()
		f.done, f.end, f.err = true, w.now(), err
		if err == nil {
			w.seq++
			r.forgot[key] = append(r.forgot[key], w.seq)
			f.endSeq = w.seq
		}
		w.mu.Unlock()
		w.logf("forget %s on %s returns %v", key, r.name, err)
		w.bump()
	}()
}

// closeSlot closes the runtime in slot (on its own goroutine, since Close
// waits for running functions) and starts a new one in its place.
func (w *simWorld) closeSlot(slot int) {
	old := w.slots[slot]
	var ctx *simCtx
	if w.rng.IntN(2) == 0 {
		ctx = newSimCtx(time.Time{})
	}
	w.mu.Lock()
	old.closing, old.closeAt = true, w.now()
	w.mu.Unlock()
	w.startClose(old, ctx, false)
	w.slots[slot] = w.newRT(slot)
}

// closeAgain calls Close a second time on a closing runtime, with a
// deadline a few steps ahead.
func (w *simWorld) closeAgain(r *simRT) {
	w.mu.Lock()
	n := 0
	for _, cl := range w.closers {
		if cl.rt == r {
			n++
		}
	}
	w.mu.Unlock()
	if n >= 3 {
		return
	}
	d := time.Duration(1+w.rng.IntN(5)) * w.cfg.step
	cl := w.startClose(r, newSimCtx(w.now().Add(d)), true)
	w.afterFunc(d, func() { w.endClose(cl, context.DeadlineExceeded) })
}

func (w *simWorld) startClose(r *simRT, ctx *simCtx, second bool) *simCloser {
	cl := &simCloser{rt: r, ctx: ctx, second: second, start: w.now()}
	w.mu.Lock()
	w.closers = append(w.closers, cl)
	w.mu.Unlock()
	what := "close"
	if second {
		what = "close again"
	}
	if ctx == nil {
		w.logf("%s %s (background ctx)", what, r.name)
	} else {
		w.logf("%s %s", what, r.name)
	}
	go func() {
		var c context.Context = context.Background()
		if ctx != nil {
			c = ctx
		}
		err := r.rt.Close(c)
		w.mu.Lock()
		cl.done, cl.end, cl.err = true, w.now(), err
		w.mu.Unlock()
		w.logf("%s %s returns %v", what, r.name, err)
		w.bump()
	}()
	return cl
}

func (w *simWorld) openClosers() []*simCloser {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []*simCloser
	for _, cl := range w.closers {
		if !cl.done && cl.cancelAt.IsZero() {
			out = append(out, cl)
		}
	}
	return out
}

func (w *simWorld) cancelClose(cl *simCloser) { w.endClose(cl, context.Canceled) }

func (w *simWorld) endClose(cl *simCloser, err error) {
	w.mu.Lock()
	ok := !cl.done && cl.ctx.end(err)
	if ok {
		cl.cancelAt = w.now()
	}
	w.mu.Unlock()
	if ok {
		w.logf("the context of a Close of %s ends (%v)", cl.rt.name, err)
	}
}

// wakeAll delivers a "wake-ups may have been lost" to r, as a store does
// after it reconnects.
func (w *simWorld) wakeAll(r *simRT) {
	w.mu.Lock()
	fn := r.wakeFn
	w.mu.Unlock()
	if fn != nil {
		w.logf("wake every key of %s", r.name)
		fn("")
		w.quiesce()
	}
}

// teardown lets every function return, waits for the world to come to rest
// (every call answered, every runtime idle), closes the runtimes and checks
// that they stopped.
func (w *simWorld) teardown() {
	w.faultsOff.Store(true)
	w.logf("teardown: no more faults; every function is told to return")
	strict := !w.failed()
	const maxSteps = 600
	rest := false
	for i := 0; i < maxSteps && !w.tooSlow(); i++ {
		for _, x := range w.runningExecs() {
			if !x.told {
				w.tell(x, actValue, false)
			}
		}
		if !strict {
			for _, cl := range w.openClosers() {
				if cl.ctx != nil {
					w.cancelClose(cl)
				}
			}
		}
		w.quiesce()
		if strict {
			w.check()
		}
		if rest = w.atRest(); rest {
			break
		}
		w.advance()
	}
	if !rest && strict {
		w.violate("stuck", "the world did not come to rest after %v of fake time with no new calls: %s", time.Duration(maxSteps)*w.cfg.step, w.restReport())
	}
	// Close every runtime still open (and wait for those closing).
	var wg sync.WaitGroup
	for _, r := range w.slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := r.rt.Close(ctx); err != nil && !w.failed() {
				w.violate("close-"+r.name, "Close of %s, idle, returned %v", r.name, err)
			}
		}()
	}
	wg.Wait()
	deadline := time.Now().Add(10 * time.Second)
	for !w.closersDone() && time.Now().Before(deadline) {
		w.advance()
		time.Sleep(time.Millisecond) // real goroutines finish the Closes; a hang is a violation, with its seed
	}
	if !w.closersDone() && !w.failed() {
		w.violate("close-hangs", "a Close did not return within 10s after every function returned")
	}
	w.mem.Close()
}

func (w *simWorld) closersDone() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, cl := range w.closers {
		if !cl.done {
			return false
		}
	}
	return true
}

// atRest reports whether every call, execution, Forget and Close is over
// and every open runtime holds nothing.
func (w *simWorld) atRest() bool { return w.restReport() == "" }

func (w *simWorld) restReport() string {
	w.mu.Lock()
	var out []string
	for _, c := range w.calls {
		if !c.done {
			out = append(out, fmt.Sprintf("call %d has not returned", c.id))
		}
	}
	for _, x := range w.execs {
		if x.running {
			out = append(out, fmt.Sprintf("exec %s still runs", x.id))
		}
	}
	for _, f := range w.forgets {
		if !f.done {
			out = append(out, fmt.Sprintf("forget %s on %s has not returned", f.key, f.rt.name))
		}
	}
	for _, cl := range w.closers {
		if !cl.done {
			out = append(out, fmt.Sprintf("close of %s has not returned", cl.rt.name))
		}
	}
	w.mu.Unlock()
	for _, r := range w.slots {
		if st := r.rt.Stats(); st.InFlight != 0 || st.Waiters != 0 || st.Pending != 0 {
			out = append(out, fmt.Sprintf("%s: %d keys in flight, %d waiters, %d pending", r.name, st.InFlight, st.Waiters, st.Pending))
		}
	}
	if len(out) == 0 {
		return ""
	}
	if len(out) > 8 {
		out = append(out[:8], fmt.Sprintf("and %d more", len(out)-8))
	}
	return strings.Join(out, "; ")
}
