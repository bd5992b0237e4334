package actors

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemrt/idem/internal/handoff"
	"github.com/idemrt/idem/keyshard"
	"github.com/idemrt/idem/store"
)

// Set is the fixed set of shards of one runtime, with the actor system that
// runs them. Keys map to shards with [keyshard.Index].
type Set struct {
	sys      *actorSystem
	instance string        // the prefix of every claim owner of this set
	ownerSeq atomic.Uint64 // the sequence of the shards' claim owners
	// callerIDs hands out claim owners to claims made on callers'
	// goroutines (claimHere): *ownerIDs, each used by one goroutine at a
	// time.
	callerIDs sync.Pool
	shards    []*shard
	cfg       *Config
	started   atomic.Bool
	stopWake  func()
	// stopInval ends the store's invalidation subscription (nil: none).
	stopInval      func()
	nInvalidations atomic.Int64
	live           *liveMonitor // nil without early takeover
	once           sync.Once
	done           chan struct{}
	force          chan struct{} // closed by a later Close whose ctx ended first
	// observeOff, once Close is done, drops the batch observer\'s calls.
	observeMu  sync.RWMutex
	observeOff bool
	forceOnce  sync.Once
	closeErr   error
}

// Stats is a snapshot of one shard's counters.
type Stats struct {
	InFlight int   // keys with callers in flight
	Waiters  int   // callers parked on a key another caller runs
	Pending  int   // callers admitted and not yet answered
	Batches  int64 // store batches sent since start
	Ops      int64 // store operations sent since start
	// EarlyTakeovers counts the keys taken over from an owner whose
	// instance was found dead, before its lease ended.
	EarlyTakeovers int64
	// The LRU: results held, and their weight in bytes (Cached.Size).
	CacheEntries int
	CacheBytes   int64
	// CacheDrops counts the LRU entries dropped by store invalidations
	// (store.Invalidator).
	CacheDrops int64
	// Invalidations counts the invalidations the set received from the
	// store (a lost subscription counts one). It is the set's, not a
	// shard's: shard 0 reports it, the others 0, so that a sum over the
	// shards counts each once.
	Invalidations int64
}

// NewSet starts n shard actors sharing cfg. Its Logger, Clock and Store must
// be set.
func NewSet(ctx context.Context, n int, cfg Config) (*Set, error) {
	if n <= 0 {
		return nil, errors.New("idem: shard count must be positive")
	}
	instance, err := instanceID()
	if err != nil {
		return nil, err
	}
	set := &Set{cfg: &cfg, instance: instance, done: make(chan struct{}), force: make(chan struct{})}
	if observe := cfg.OnBatch; observe != nil {
		// A batch still out after a Close that gave up on its deadline
		// ends on its own; its observer call is dropped once Close is done.
		set.cfg.OnBatch = func(shard, ops, failed int, took time.Duration) {
			set.observeMu.RLock()
			defer set.observeMu.RUnlock()
			if !set.observeOff {
				observe(shard, ops, failed, took)
			}
		}
	}
	if w, ok := cfg.Store.(store.Waker); ok {
		id, stop, err := w.Subscribe(ctx, set.route)
		if err != nil {
			return nil, err
		}
		cfg.wakerID, set.stopWake = id, stop
	}
	if iv, ok := cfg.Store.(store.Invalidator); ok && cfg.CacheEntries > 0 {
		stop, err := iv.SubscribeInvalidations(ctx, set.onInvalidation)
		if err != nil {
			if set.stopWake != nil {
				set.stopWake()
			}
			return nil, err
		}
		set.stopInval = stop
	}
	if l, ok := cfg.Store.(store.Liveness); ok && cfg.EarlyTakeover {
		set.live = newLiveMonitor(set.cfg, l, instance, func() { set.route("") })
		set.cfg.dead = set.live.dead
		set.live.start()
	}
	set.sys = newActorSystem(cfg.Logger)
	set.shards = make([]*shard, n)
	for i := range set.shards {
		set.shards[i] = newShard(set.cfg)
		if set.cfg.newOwner == nil {
			ids := &ownerIDs{instance: instance, seq: &set.ownerSeq}
			set.shards[i].newOwner = ids.get
		}
		set.shards[i].index = i
		set.shards[i].done = set.done
		set.sys.spawn(set.shards[i])
	}
	set.started.Store(true)
	return set, nil
}

func instanceID() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// Owns reports whether owner, the owner of a claim as a store reports it,
// is one of this set's claims: every owner the set makes starts with its
// random instance id.
func (set *Set) Owns(owner string) bool {
	rest, ok := strings.CutPrefix(owner, set.instance)
	return ok && strings.HasPrefix(rest, "-")
}

// route delivers a store wake-up to the shard of key, or to every shard.
func (set *Set) route(key string) {
	if !set.started.Load() {
		return // nothing can be waiting yet
	}
	select {
	case <-set.done:
		return
	default:
	}
	if key == "" {
		for _, s := range set.shards {
			handoff.Note(handoff.Wake)
			s.send(&wake{})
		}
		return
	}
	handoff.Note(handoff.Wake)
	set.shardOf(key).send(&wake{key: key})
}

// shardOf returns the shard of key.
func (set *Set) shardOf(key string) *shard { return set.shards[keyshard.Index(key, len(set.shards))] }

// ErrOverloaded is Send's answer when the key's shard has as many calls
// pending as Config.MaxPending.
var ErrOverloaded = errors.New("idem: shard overloaded")

// Send hands r to the shard of its key, admitting it first unless
// r.NoAdmit is set: ErrOverloaded when the shard has MaxPending calls
// pending (an admitted call must Leave once it is over), store.ErrClosed
// when the runtime is closing. r.Reply must have a buffer of one.
//
// A request that Send accepted is always answered: Close lets every Send
// in progress finish before the shard learns it is closing, so every
// accepted request reaches the actor before its shutdown and gets a reply.
// That spares waiters a select on a channel shared by all of them.
func (set *Set) Send(r *Request) error {
	s := set.shardOf(r.Key)
	r.shard = s
	if !r.NoAdmit && !s.gate.Enter() {
		return ErrOverloaded
	}
	if r.Direct && s.direct && r.Lease >= minDirectLease && set.claimHere(s, r) {
		return nil
	}
	handoff.Note(handoff.Request)
	if !s.sendIfOpen((*requestMsg)(r)) {
		if !r.NoAdmit {
			s.gate.Leave()
		}
		return store.ErrClosed
	}
	return nil
}

// Leave ends a call of key that Send admitted.
func (set *Set) Leave(key string) { set.shardOf(key).gate.Leave() }

// Finish hands an owner's result to the shard it was granted by.
func (set *Set) Finish(f *Finish) {
	if f.Req.dstate.Load() != 0 && set.finishHere(f) {
		return
	}
	handoff.Note(handoff.Finish)
	f.Req.shard.send((*finishMsg)(f))
}

// Abandon tells the shard of r that its caller stopped waiting.
func (set *Set) Abandon(r *Request) {
	r.shard.announce(r) // a direct owner that leaves: the shard releases its key
	handoff.Note(handoff.Abandon)
	r.shard.send(&abandon{req: r})
}

// Quiet tells the shard of r, the owner of its key, that it is about to
// store its result itself in a transaction that locks the key's record (a
// completion that commits with the function's own work): the shard stops
// renewing its lease, since a renewal would only wait on that lock. The
// lease then ends when it ends, and the owner's Finish (Stored, or a
// Transient failure when its transaction did not commit) follows.
func (set *Set) Quiet(r *Request) {
	r.shard.send(&quiet{req: r})
}

// Hit writes into dst the LRU's record of key and reports true, if the LRU
// holds one that has not expired at now, without an actor hop. It is safe
// for concurrent use. (dst rather than a result: a caller's goroutine often
// starts with a small stack, and a record passed back by value through two
// frames made the first call of every new goroutine grow it.)
func (set *Set) Hit(key string, now time.Time, dst *Cached) bool {
	return set.shardOf(key).hitInto(key, now, dst)
}

// Forget deletes key's record from the LRU and the store, through its
// shard: store.ErrInProgress while the key has callers in flight here.
func (set *Set) Forget(ctx context.Context, key string) error {
	return set.shardOf(key).forget(ctx, key)
}

// Stats calls each with each shard's index and counters, in index order
// (a callback rather than a slice: Stats is read in loops, and should
// neither allocate nor need a large frame).
func (set *Set) Stats(each func(shard int, st Stats)) {
	for i, s := range set.shards {
		st := Stats{InFlight: int(s.nEntries.Load() + s.pending.Load()), Waiters: int(s.nWaiters.Load()), Pending: s.gate.Pending(),
			Batches: s.nBatches.Load(), Ops: s.nOps.Load(), EarlyTakeovers: s.nEarly.Load(), CacheDrops: s.nDrops.Load()}
		if s.cache != nil {
			st.CacheEntries, st.CacheBytes = s.cache.Len(), s.cacheBytes.Load()
		}
		if i == 0 {
			st.Invalidations = set.nInvalidations.Load()
		}
		each(i, st)
	}
}

// Close shuts the shards down: parked callers get FailClosed at once,
// running owners have their context cancelled, and Close waits until their
// results are stored or released, or until ctx is done; then it stops the
// actors and every goroutine they own. It is idempotent; later calls wait
// for the first and return its result.
//
// Every call honours its own ctx: when a later call's ctx ends before the
// first call is done, it ends the first call's wait for running functions
// as its own ctx would have, and returns ctx's error once the shards have
// stopped.
func (set *Set) Close(ctx context.Context) error {
	first := false
	set.once.Do(func() { first = true })
	if first {
		return set.close(ctx)
	}
	select {
	case <-set.done:
		return set.closeErr // done already: never a coin toss with ctx
	default:
	}
	select {
	case <-set.done:
		return set.closeErr
	case <-ctx.Done():
		// Stop the first call's wait as if its own ctx had ended: the
		// caller that gave up expects the runtime stopped when it returns.
		set.forceOnce.Do(func() { close(set.force) })
		<-set.done
		return ctx.Err()
	}
}

// errForced is the first Close's error when a later Close gave up first.
var errForced = fmt.Errorf("idem: Close stopped waiting for running functions: a later Close's context ended first: %w", context.Canceled)

func (set *Set) close(ctx context.Context) error {
	for _, s := range set.shards {
		s.shutDoor()
		s.promoteAll() // after the door: no direct owner comes later
		s.send(&closing{})
	}
	var err error
	for _, s := range set.shards {
		select {
		case <-s.drained:
		case <-ctx.Done():
			err = ctx.Err()
		case <-set.force:
			err = errForced
		}
		if err != nil {
			break
		}
	}
	if set.stopWake != nil {
		set.stopWake()
	}
	if set.stopInval != nil {
		set.stopInval()
	}
	if set.live != nil {
		set.live.stop()
	}
	for _, s := range set.shards {
		set.sys.stop(s)
	}
	for _, s := range set.shards {
		for _, p := range s.parts {
			if err != nil {
				// Past the deadline: a store batch still out finishes
				// (within StoreTimeout) on its own, and its results go
				// nowhere.
				p.io.Halt()
			} else {
				p.io.Stop()
			}
		}
	}
	set.observeMu.Lock() // waits for observer calls under way
	set.observeOff = true
	set.observeMu.Unlock()
	set.closeErr = err // before done is closed: later calls read it after
	close(set.done)
	if set.cfg.OnStop != nil {
		set.cfg.OnStop()
	}
	set.sys.shutdown()
	return err
}
