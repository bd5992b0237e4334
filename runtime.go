package idem

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/idemrt/idem/actors"
	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// Runtime runs functions once per idempotency key. Create it with [New],
// call [Do] from any goroutine, and [Runtime.Close] it when done.
type Runtime struct {
	opts  Options
	clock clock.Clock
	set   *actors.Set
	// stopped is closed when the shards have stopped (actors.Config.OnStop).
	stopped  chan struct{}
	closed   atomic.Bool
	ownStore *memstore.Store
	store    store.Store // the store in use: Options.Store, or ownStore
	// ownerCompletes: owners complete their key in the store themselves
	// (store.OwnerCompleter).
	ownerCompletes bool
	// resultLimit names what set opts.MaxResultBytes, for its error.
	resultLimit string
	defaults    callOptions

	observing       bool // an Observer or a tracer is set
	tracer          trace.Tracer
	lastOverloadLog atomic.Int64 // when overload was last logged, Unix ns
}

// New starts a runtime: its shard actors and, with a store that can wake
// waiters across instances, its subscription.
func New(opts Options) (*Runtime, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	rt := &Runtime{opts: o, clock: o.Clock, stopped: make(chan struct{})}
	if o.Store == nil {
		full := memstore.RefuseWhenFull
		if o.EvictWhenFull {
			full = memstore.EvictWhenFull
		}
		rt.ownStore = memstore.New(memstore.Options{Clock: o.Clock, WhenFull: full})
		o.Store = rt.ownStore
	}
	rt.store = o.Store
	_, rt.ownerCompletes = o.Store.(store.OwnerCompleter)
	rt.resultLimit = "Options.MaxResultBytes"
	if sl, ok := o.Store.(store.SizeLimited); ok {
		// Keep results below what the store's server takes: one over it
		// would be refused, or worse, break a connection other keys share.
		if most := max(1, sl.MaxRecordBytes()-store.RecordOverhead); most < o.MaxResultBytes {
			o.MaxResultBytes = most
			rt.opts.MaxResultBytes = most
			rt.resultLimit = fmt.Sprintf("the store's %d-byte records, less %d for its overhead", sl.MaxRecordBytes(), store.RecordOverhead)
		}
	}
	warnTimeoutFloor(o)
	perShard := 0
	if !o.DisableCache {
		// Rounded up without (a+b-1)/b, which overflows near math.MaxInt
		// and would turn the cache off.
		perShard = o.CacheEntries / o.Shards
		if o.CacheEntries%o.Shards != 0 {
			perShard++
		}
	}
	rt.set, err = actors.NewSet(context.Background(), o.Shards, actors.Config{
		Store:        o.Store,
		Clock:        o.Clock,
		Logger:       o.Logger,
		CacheEntries: perShard,
		CacheBytes:   max(1, o.CacheBytes/int64(o.Shards)),
		MaxPending:   o.MaxPending,
		MaxWaiters:   o.MaxWaitersPerKey,
		Oversized:    rt.oversized,
		MaxBatch:     o.MaxBatch,
		StoreTimeout: o.StoreTimeout,
		PollInterval: o.PollInterval,
		OnBatch:      batchObserver(o.Observer),
		OnStop:       func() { close(rt.stopped) },

		EarlyTakeover: !o.Liveness.Disable,
		LiveEvery:     o.Liveness.Every,
		LiveTTL:       o.Liveness.TTL,
		LiveGrace:     o.Liveness.Grace,
	})
	if err != nil {
		return nil, fmt.Errorf("idem: start shards: %w", err)
	}
	if o.TracerProvider != nil {
		rt.tracer = o.TracerProvider.Tracer("github.com/idemrt/idem")
	}
	rt.observing = o.Observer != nil || rt.tracer != nil
	rt.defaults = callOptions{codec: JSON}
	rt.defaults.setPolicy(o.Policy)
	return rt, nil
}

// warnTimeoutFloor logs a warning when the store's operations can outlast
// StoreTimeout (a go-redis client without ContextTimeoutEnabled and a
// ReadTimeout longer than StoreTimeout): on a stalled server, each batch
// then waits for the client's own timeout.
func warnTimeoutFloor(o Options) {
	tf, ok := o.Store.(store.TimeoutFloor)
	if !ok {
		return
	}
	floor := tf.TimeoutFloor()
	if floor == 0 || floor > 0 && floor <= o.StoreTimeout {
		return
	}
	o.Logger.Warn("idem: the store's client does not apply StoreTimeout to its reads: on a stalled server each batch waits for the client's own timeout (set ContextTimeoutEnabled on go-redis's options, or a ReadTimeout no longer than StoreTimeout)",
		"store_timeout", o.StoreTimeout, "client_timeout", floorText(floor))
}

func floorText(d time.Duration) string {
	if d < 0 {
		return "none"
	}
	return d.String()
}

// MaxResultBytes returns the largest encoded result rt stores:
// Options.MaxResultBytes, lowered to what its store takes when the store
// says (store.SizeLimited). A larger result is stored as a permanent
// ErrResultTooLarge. Front ends that bound what they store (httpidem's
// MaxStoredBody) check their bound against it.
func (rt *Runtime) MaxResultBytes() int { return rt.opts.MaxResultBytes }

// Must returns rt, or panics if err is not nil. It suits package-level
// runtimes: var rt = idem.Must(idem.New(idem.Options{})).
func Must(rt *Runtime, err error) *Runtime {
	if err != nil {
		panic(err)
	}
	return rt
}

// Close shuts the runtime down. Calls that wait for another caller get
// ErrClosed at once; functions that are running have their context
// cancelled, and Close waits until their results are stored (or their keys
// released), so no finished side effect goes unrecorded; later calls get
// ErrClosed. If ctx ends first, Close stops waiting, fails the remaining
// callers with ErrClosed, and returns ctx's error. When Close returns, no
// goroutine of the runtime is left: only functions that ignore their
// context may still be running, and, after a Close whose ctx ended, a store
// batch still out (until it answers or StoreTimeout ends it).
//
// Close is idempotent, and every call honours its own ctx: a second Close
// whose ctx ends while a first one waits for running functions ends that
// wait too, and returns ctx's error (the first then returns an error that
// wraps context.Canceled). A store given in Options is not
// closed.
func (rt *Runtime) Close(ctx context.Context) error {
	rt.closed.Store(true)
	err := rt.set.Close(ctx)
	if rt.ownStore != nil {
		rt.ownStore.Close()
	}
	return err
}

// Stats is a snapshot of a runtime's counters.
type Stats struct {
	Shards   int   // number of shards
	InFlight int   // keys with callers in flight
	Waiters  int   // callers parked on a key another caller runs
	Pending  int   // callers admitted and not yet answered
	Batches  int64 // store batches sent since start
	Ops      int64 // store operations sent since start
	// EarlyTakeovers counts the keys this runtime took over from an owner
	// whose instance was found dead (Options.Liveness), before its lease
	// ended.
	EarlyTakeovers int64
	// The hot cache: results held, and their weight in bytes (see
	// Options.CacheBytes).
	CacheEntries int
	CacheBytes   int64
	// Invalidations counts the messages of a store that implements
	// store.Invalidator (a key forgotten or a scope cleared by any
	// instance sharing the store, or a lost subscription), and CacheDrops
	// the cached results they dropped.
	Invalidations int64
	CacheDrops    int64
}

// Stats returns the runtime's counters: keys in flight, parked callers,
// pending callers, store batches and operations.
func (rt *Runtime) Stats() Stats {
	var st Stats
	rt.set.Stats(func(_ int, s actors.Stats) {
		st.Shards++
		st.InFlight += s.InFlight
		st.Waiters += s.Waiters
		st.Pending += s.Pending
		st.Batches += s.Batches
		st.Ops += s.Ops
		st.EarlyTakeovers += s.EarlyTakeovers
		st.CacheEntries += s.CacheEntries
		st.CacheBytes += s.CacheBytes
		st.CacheDrops += s.CacheDrops
		st.Invalidations += s.Invalidations
	})
	return st
}

// StoreCounts returns the counters of the runtime's store, if it keeps any
// (store.Counted: slot reloads and unconfirmed writes on Redis, evicted
// results and refused claims in memory), or nil.
func (rt *Runtime) StoreCounts() []store.Count {
	if c, ok := rt.store.(store.Counted); ok {
		return c.Counts()
	}
	return nil
}

// ShardStats is a snapshot of one shard's counters.
type ShardStats struct {
	InFlight int // keys with callers in flight
	Waiters  int // callers parked on a key another caller runs
	Pending  int // callers admitted and not yet answered (against Options.MaxPending)
}

// ShardStats returns each shard's counters, by shard index: keys in
// flight, parked callers, pending callers (against Options.MaxPending).
func (rt *Runtime) ShardStats() []ShardStats {
	var out []ShardStats
	rt.set.Stats(func(_ int, st actors.Stats) {
		out = append(out, ShardStats{InFlight: st.InFlight, Waiters: st.Waiters, Pending: st.Pending})
	})
	return out
}

// warnOverload logs an overload at most once a second.
func (rt *Runtime) warnOverload(key string) {
	now := time.Now().UnixNano()
	last := rt.lastOverloadLog.Load()
	if now-last < int64(time.Second) || !rt.lastOverloadLog.CompareAndSwap(last, now) {
		return
	}
	rt.opts.Logger.Warn("idem: a shard is overloaded; calls fail with ErrOverloaded",
		"max_pending", rt.opts.MaxPending, "namespace", namespaceOf(key))
}

// Forget deletes the stored result of key, in this runtime's cache and in
// the store, so the next call runs again. It returns a *ConflictError while
// the key is in progress.
//
// With a store that implements [store.Invalidator] (memstore, redisstore,
// pgstore), the store tells every runtime that shares it, and each drops the
// key from its cache: shortly after Forget returns (docs/operations.md
// gives the bound), no instance replays the result. A runtime that may
// have missed the message (its subscription reconnected) drops its whole
// cache. With any other store, other instances may keep replaying the
// result from their own caches until it expires there.
func (rt *Runtime) Forget(ctx context.Context, key string) error {
	if err := store.ValidateKey(key); err != nil {
		return err
	}
	if rt.closed.Load() {
		return keyErr(key, ErrClosed)
	}
	err := rt.set.Forget(ctx, key)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrInProgress):
		return &ConflictError{Key: key, State: "in-progress"}
	case errors.Is(err, store.ErrClosed):
		return keyErr(key, ErrClosed)
	case errors.Is(err, ctx.Err()):
		return err
	default:
		return &StoreError{Key: key, Op: store.OpForget.String(), Err: err}
	}
}
