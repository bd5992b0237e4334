package actors

import (
	"context"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/internal/handoff"
	"github.com/idemrt/idem/mailbox"
	"github.com/idemrt/idem/store"
)

// Config is what every shard of a runtime shares.
type Config struct {
	Store        store.Store
	Clock        clock.Clock
	Logger       *slog.Logger // never nil
	CacheEntries int          // per shard; 0 disables the LRU
	// CacheBytes bounds, per shard, the bytes of the results the LRU holds,
	// each weighted by its encoded size (Cached.Size); 0: no byte bound. A
	// result larger than it is not cached (the store serves it).
	CacheBytes int64
	MaxPending int // per shard; 0: no limit
	// MaxWaiters bounds the callers parked on one key; more get
	// FailOverloaded. 0: none but MaxPending.
	MaxWaiters int
	// Oversized, when set, turns a result the store refused for its size
	// (store.ErrTooLarge) into the small permanent record stored in its
	// place, and the error its callers get: the function ran, so its key
	// must not be released for another run. It gets the key, the refused
	// record and the store's error. Without it, such a refusal is final
	// for the callers and the key is released, as for any refusal.
	Oversized    func(key string, refused store.Record, err error) (store.Record, error)
	MaxBatch     int // most operations in one store batch; 0: no limit
	StoreTimeout time.Duration
	// PollInterval is the longest wait between two re-claims of a key held
	// by another instance when the store cannot wake waiters (no
	// store.Waker); 0 means DefaultPollInterval.
	PollInterval time.Duration
	// newOwner returns a claim owner string unique across processes.
	newOwner func() string
	// wakerID is this instance's id for store wake-ups ("" when the store
	// cannot wake).
	wakerID string
	// OnBatch, when set, is called on the shard's I/O worker after each
	// store batch (never for an in-process store, never on the actor): the
	// shard's index, the batch's operations, how many of them failed with a
	// store error (not a contract error), and how long it took.
	OnBatch func(shard, ops, failed int, took time.Duration)
	// OnStop, when set, is called once when the shards have stopped (by
	// Close, or a forced Close past its deadline): a caller still waiting
	// on a shard then gets no answer and must give up.
	OnStop func()
	// EarlyTakeover turns on liveness beats and early takeover (see
	// liveness.go) when the store implements store.Liveness. LiveEvery,
	// LiveTTL and LiveGrace are its settings; 0 means DefaultLiveEvery,
	// DefaultLiveTTL and DefaultLiveGrace.
	EarlyTakeover bool
	LiveEvery     time.Duration
	LiveTTL       time.Duration
	LiveGrace     time.Duration
	// dead reports whether a holder's owner belongs to an instance found
	// dead (nil without early takeover).
	dead func(owner string) bool
}

// shard is one shard actor with its LRU and admission gate.
type shard struct {
	newOwner func() string // a claim owner unique across processes; shard goroutine only
	cfg      *Config
	index    int
	done     <-chan struct{} // the set's: closed when the shards have stopped
	root     *actor.RootContext
	pid      *actor.PID
	worker   *mailbox.Worker
	inline   bool
	// direct: the store is in process and its owners complete their keys,
	// so a caller may claim its key itself (see direct.go); dir keeps the
	// shard's direct owners.
	direct bool
	dir    direct
	// pending counts the direct owners the shard has not adopted: listed,
	// or announced and on their way (for Stats).
	pending atomic.Int64
	cache   *resultLRU
	// cacheBytes is the weight of what cache holds (see Config.CacheBytes),
	// kept by cacheAdd and the cache's eviction callback.
	cacheBytes atomic.Int64
	gate       mailbox.Gate

	// partitioner splits the store's batches (nil: one partition).
	partitioner store.Partitioner

	// Owned by the actor's goroutine.
	entries    map[string]*keyState
	stepCfg    stepConfig
	fx         effects // the effects of the step in hand, reused
	inlineDone []*op   // answered in-process operations, handled from inlineHead on
	inlineHead int
	// spareWaiters is a broadcast's slice of waiters, kept for the next
	// key (see effects.broadcasts).
	spareWaiters []*Request
	timers       timerHeap
	armed        clock.Timer
	armedAt      time.Time
	armGen       uint64
	parts        map[int]*partition
	freeOps      []*op
	freeEntries  []*keyState
	closing      bool
	drained      chan struct{}
	drainClosed  bool
	// clearing counts, per key, the pages of a Clear that allowed the key
	// and whose store deletes are not over: an entry created meanwhile
	// caches nothing (see Set.Clear).
	clearing map[string]int

	// The door of Send and Forget: see shutDoor.
	sending atomic.Int64
	shut    atomic.Bool

	// Read by Stats from any goroutine.
	nEntries atomic.Int64
	nWaiters atomic.Int64
	nBatches atomic.Int64
	nOps     atomic.Int64
	nEarly   atomic.Int64 // keys taken over from a dead instance's owner
	nDrops   atomic.Int64 // LRU entries dropped by store invalidations

	lastStoreWarn time.Time // owned by the actor: rate of store warnings
}

// warnStore logs a store failure, at most once a second per shard: during
// an outage every call fails the same way.
func (s *shard) warnStore(op, key string, err error) {
	if store.IsContract(err) {
		return
	}
	now := time.Now()
	if now.Sub(s.lastStoreWarn) < time.Second {
		return
	}
	s.lastStoreWarn = now
	s.cfg.Logger.Warn("idem: store "+op+" failed; callers get ErrStoreUnavailable", "key", key, "err", err)
}

func newShard(cfg *Config) *shard {
	s := &shard{
		cfg:     cfg,
		entries: make(map[string]*keyState),
		drained: make(chan struct{}),
	}
	s.stepCfg = stepConfig{pollMost: cfg.PollInterval, waker: cfg.wakerID != "", maxWaiters: cfg.MaxWaiters, oversized: cfg.Oversized}
	s.partitioner, _ = cfg.Store.(store.Partitioner)
	s.gate.SetLimit(cfg.MaxPending)
	if cfg.CacheEntries > 0 {
		// Every value that leaves (an eviction, Remove, an expired hit, a
		// replaced value, Purge) goes through the callback.
		s.cache = newResultLRU(cfg.CacheEntries, func(c Cached) {
			s.cacheBytes.Add(-int64(c.Size))
		})
	}
	s.newOwner = cfg.newOwner // NewSet gives each shard its own otherwise
	_, s.inline = cfg.Store.(store.InProcess)
	_, completes := cfg.Store.(store.OwnerCompleter)
	s.direct = s.inline && completes
	return s
}

// sendIfOpen hands msg to the actor, or reports false once the door is
// shut (see shutDoor).
func (s *shard) sendIfOpen(msg any) bool {
	s.sending.Add(1)
	if s.shut.Load() {
		s.sending.Add(-1)
		return false
	}
	s.root.Send(s.pid, msg)
	s.sending.Add(-1)
	return true
}

// shutDoor refuses every later sendIfOpen and waits for those in progress.
func (s *shard) shutDoor() {
	s.shut.Store(true)
	for s.sending.Load() != 0 {
		runtime.Gosched()
	}
}

// Forget deletes key's record from the LRU and the store.
func (s *shard) forget(ctx context.Context, key string) error {
	m := &forget{key: key, reply: make(chan error, 1)}
	if !s.sendIfOpen(m) {
		return store.ErrClosed
	}
	select {
	case err := <-m.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	case <-s.done:
		return store.ErrClosed
	}
}

// cacheAdd keeps c as key's result in the LRU, within the shard's byte
// bound: the least recently used results go first, and a result heavier
// than the whole bound is not kept. (On the shard's goroutine only: the
// hit path only reads and removes.)
func (s *shard) cacheAdd(key string, c Cached) {
	most := s.cfg.CacheBytes
	if most > 0 && int64(c.Size) > most {
		s.cache.Remove(key) // an older result of the key must not stay
		return
	}
	s.cacheBytes.Add(int64(c.Size))
	s.cache.Add(key, c) // a value it replaces goes through the callback
	for most > 0 && s.cacheBytes.Load() > most {
		if _, _, ok := s.cache.RemoveOldest(); !ok {
			break
		}
	}
}

// lookup returns a copy of the cached terminal record of key, if the LRU
// holds one that has not expired at now. It is safe for concurrent use.
func (s *shard) lookup(key string, now time.Time) *Cached {
	c, ok := s.hit(key, now)
	if !ok {
		return nil
	}
	p := new(Cached) // only on a hit: c itself stays on the stack
	*p = c
	return p
}

// hit is lookup without the allocation: the cached record of key, and
// whether the LRU holds one that has not expired at now. The LRU keeps
// records by value (one allocation per entry, not two).
func (s *shard) hit(key string, now time.Time) (Cached, bool) {
	if s.cache == nil {
		return Cached{}, false
	}
	c, ok := s.cache.Get(key)
	if !ok {
		return Cached{}, false
	}
	if !now.Before(c.Record.ExpiresAt) {
		s.cache.Remove(key)
		return Cached{}, false
	}
	return c, true
}

// hitUnless is hit, or no hit when skip is set.
func (s *shard) hitUnless(skip bool, key string, now time.Time) (Cached, bool) {
	if skip {
		return Cached{}, false
	}
	return s.hit(key, now)
}

// hitInto is hit writing into dst.
func (s *shard) hitInto(key string, now time.Time, dst *Cached) bool {
	if s.cache == nil {
		return false
	}
	c, ok := s.cache.Get(key)
	if !ok {
		return false
	}
	if !now.Before(c.Record.ExpiresAt) {
		s.cache.Remove(key)
		return false
	}
	*dst = c
	return true
}

func (s *shard) send(msg any) { s.root.Send(s.pid, msg) }

// shardActor is a shard as protoactor sees it.
type shardActor shard

// Receive handles one message on the shard's goroutine.
func (a *shardActor) Receive(c actor.Context) { (*shard)(a).receive(c) }

func (s *shard) receive(c actor.Context) {
	defer s.recoverPanic(c.Message())
	defer s.drainInline()
	switch m := c.Message().(type) {
	case *requestMsg:
		s.onRequest((*Request)(m))
	case *finishMsg:
		s.onFinish((*Finish)(m))
	case *abandon:
		s.onAbandon(m.req)
	case *quiet:
		s.onQuiet(m.req)
	case *batchDone:
		s.onBatch(m)
	case *tick:
		s.onTick(m)
	case *wake:
		s.onWake(m.key)
	case *forget:
		s.onForget(m)
	case *clearMsg:
		s.onClear((*clearPart)(m))
	case *endClear:
		s.onEndClear(m.p)
	case *dropCached:
		s.onDropCached(m)
	case *invalidate:
		s.onInvalidate(m.inv)
	case *probe:
		s.onProbe(m)
	case *closing:
		s.onClosing()
	case *actor.Stopping:
		s.onStopping()
	}
}

// recoverPanic keeps the shard alive after a bug in its own code. The state
// of the key in hand may be inconsistent, so it is logged as an error.
func (s *shard) recoverPanic(msg any) {
	if p := recover(); p != nil {
		s.cfg.Logger.Error("idem: shard actor recovered from a panic",
			"panic", fmt.Sprint(p), "message", fmt.Sprintf("%T", msg), "stack", string(debug.Stack()))
	}
}

func (s *shard) now() time.Time { return s.cfg.Clock.Now() }

// rearm makes sure a clock timer will fire for the earliest deadline.
func (s *shard) rearm() {
	if len(s.timers) == 0 {
		return
	}
	at := s.timers[0].at
	if s.armed != nil && !s.armedAt.After(at) {
		return // the armed timer fires first; it re-arms then
	}
	if s.armed != nil {
		s.armed.Stop()
	}
	s.armGen++
	gen := s.armGen
	s.armedAt = at
	if d := at.Sub(s.now()); d <= 0 {
		// Due already (a direct owner adopted after its renewal time,
		// say): a fake clock would fire it only at its next Advance.
		s.armed = dueTimer{}
		s.send(&tick{gen: gen})
		return
	}
	s.armed = s.cfg.Clock.AfterFunc(at.Sub(s.now()), func() {
		handoff.Note(handoff.Tick)
		s.send(&tick{gen: gen})
	})
}

// dueTimer is the armed timer of a tick already sent (see rearm).
type dueTimer struct{}

func (dueTimer) Stop() bool { return false }

func (s *shard) onTick(m *tick) {
	if m.gen == s.armGen {
		s.armed = nil
	}
	now := s.now()
	for it := s.timers.popDue(now); it != nil; it = s.timers.popDue(now) {
		s.onTimer(it)
	}
	s.rearm()
}

// checkDrained closes drained once a closing shard holds no key and no
// batch: every owner's result is stored or released.
func (s *shard) checkDrained() {
	if s.closing && !s.drainClosed && len(s.entries) == 0 && !s.inFlight() {
		s.drainClosed = true
		close(s.drained)
	}
}
