// Package memstore is idem's default store: an in-process [store.Store] that
// keeps every key in memory.
//
// It is sharded by key hash, takes one short critical section per operation,
// and expires records lazily: every operation also removes a few records
// whose time has passed (kept in FIFO queues, one per distinct lifetime, so
// that each queue is already in time order), so it needs no goroutine per key,
// nor a background one.
// Fencing tokens come from one counter for the whole store: a claim takes
// the counter + 1, or, if larger, the microseconds from 2025-01-01 UTC to
// the claim by the store's clock. So a fence names one claim of the store,
// a key's fences rise after the key was released, forgotten, evicted or
// expired and claimed again, and, with the real clock, across restarts of
// the process too, as long as the clock did not go back across the restart
// by more than the counter ran ahead of it (only claims faster than one a
// microsecond make it run ahead, and the clock catches up when they stop).
// [store.ClaimResult.Attempt] is kept in each record.
//
// A claim in progress does not expire by time: its lease ending matters only
// once another claim takes the key over, so a slow owner that nobody
// replaced still completes its key, however long it took.
//
// Memory is bounded: past Options.MaxRecords, a new claim evicts a claim in
// progress that outlived its lease and result TTL (its owner is most likely
// gone); if there is none, it fails with store.ErrFull (the caller gets
// idem.ErrOverloaded) rather than drop a stored result before its TTL, whose
// retry would run its effect again: a flood of junk keys is refused, the
// real keys' results stay. Options.WhenFull = EvictWhenFull evicts the
// completed record closest to its expiry instead (a process that sees more
// distinct keys than that within a result TTL then replays only the most
// recent ones). A released or forgotten key's memory goes at once (see
// Store.Held). [Store.Evicted] counts evictions, [Store.EvictedResults] the
// results among them, [Store.Refused] the claims refused.
//
// It implements [store.Waker]: runtimes that share one Store (in one process)
// wake each other's waiters the way Redis pub/sub does across processes.
// It implements [store.Invalidator] as well: a Forget that deletes a result
// tells every runtime that shares the Store, before it returns.
// It implements [store.Inspector] and [store.Scanner] too ([Store.Scan]
// pages shard by shard, locking one shard at a time). Nothing survives the
// process.
package memstore

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/keyshard"
	"github.com/idemrt/idem/store"
)

const shardCount = 64

// Options configures a Store. The zero value is valid.
type Options struct {
	// Clock is the source of time for leases and TTLs.
	// Default: the real clock.
	Clock clock.Clock
	// MaxRecords bounds the records kept; past it, claims in progress that
	// outlived their lease and result TTL are evicted first, then completed
	// records before their TTL, those closest to expiry first. Live claims
	// are never evicted. Zero or less means the default; a huge value means
	// "very large", never "none".
	// Default: 1,048,576.
	MaxRecords int
	// WhenFull says what a claim of a new key does when the store holds
	// MaxRecords and no abandoned claim can go: refuse it with
	// store.ErrFull (RefuseWhenFull), or evict the stored result closest to
	// its expiry (EvictWhenFull).
	// Default: RefuseWhenFull.
	WhenFull Full
}

// Full is what a full store does with a claim of a new key.
type Full uint8

const (
	// RefuseWhenFull refuses the claim with store.ErrFull while unexpired
	// results fill the store: no stored result goes before its TTL, so no
	// retry runs its effect again because of a flood of other keys.
	RefuseWhenFull Full = iota
	// EvictWhenFull evicts the stored result closest to its expiry to make
	// room: new keys are always served, and a retry of an evicted key runs
	// again.
	EvictWhenFull
)

// DefaultMaxRecords is the default of Options.MaxRecords.
const DefaultMaxRecords = 1 << 20

// Store is the in-memory store. Create it with [New]; it is safe for
// concurrent use.
type Store struct {
	clock    clock.Clock
	epoch    time.Time     // tick 0 (see tick)
	fence    atomic.Uint64 // the last fence handed out
	closed   atomic.Bool
	perShard int
	whenFull Full
	evicted  atomic.Int64
	// evictedResults counts completed results evicted before their TTL;
	// refused the claims refused with ErrFull.
	evictedResults, refused atomic.Int64
	shards                  [shardCount]shard

	subMu  sync.RWMutex
	subs   map[string]func(string)
	subSeq atomic.Uint64
	// invals are the invalidation subscribers, by subscription number.
	invals map[uint64]*invalSub

	liveMu sync.Mutex
	live   map[string]time.Time // instance → end of its liveness (see liveness.go)
}

var (
	_ store.Store          = (*Store)(nil)
	_ store.InProcess      = (*Store)(nil)
	_ store.OwnerCompleter = (*Store)(nil)
	_ store.Waker          = (*Store)(nil)
	_ store.Liveness       = (*Store)(nil)
)

// New returns an empty Store.
func New(opts Options) *Store {
	c := opts.Clock
	if c == nil {
		c = clock.Real()
	}
	limit := opts.MaxRecords
	if limit <= 0 {
		limit = DefaultMaxRecords
	}
	s := &Store{clock: c, epoch: c.Now().Add(-epochBefore), subs: make(map[string]func(string)), perShard: ceilDiv(limit, shardCount), whenFull: opts.WhenFull}
	for i := range s.shards {
		s.shards[i].records = make(map[string]*record)
	}
	return s
}

// InProcess marks the store as one that never waits on I/O.
func (s *Store) InProcess() {}

// OwnerCompletes marks the store as one in which an owner completes its key
// itself (see store.OwnerCompleter).
func (s *Store) OwnerCompletes() {}

// Close makes every later operation fail with store.ErrClosed and drops all
// records. It is idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.records = make(map[string]*record)
		sh.expiry = nil
		sh.abandoned = nil
		sh.mu.Unlock()
	}
	return nil
}

// Evicted returns how many records were evicted to keep within
// Options.MaxRecords: completed records before their TTL, and claims in
// progress that outlived their lease and TTL.
func (s *Store) Evicted() int64 { return s.evicted.Load() }

// EvictedResults returns how many completed results were evicted before
// their TTL to make room (EvictWhenFull only): each is a key whose retry
// runs again.
func (s *Store) EvictedResults() int64 { return s.evictedResults.Load() }

// Refused returns how many claims of new keys were refused with
// store.ErrFull (RefuseWhenFull).
func (s *Store) Refused() int64 { return s.refused.Load() }

// Counts implements store.Counted: evictions, results evicted before their
// TTL, and claims refused by a full store.
func (s *Store) Counts() []store.Count {
	return []store.Count{
		{Name: "evictions", Help: "records evicted to make room", Value: uint64(s.evicted.Load())},
		{Name: "evicted_results", Help: "completed results evicted before their TTL", Value: uint64(s.evictedResults.Load())},
		{Name: "refused_claims", Help: "claims of new keys refused by a full store", Value: uint64(s.refused.Load())},
	}
}

// Held returns the records the store holds, and the entries its expiry
// queues hold (one per record, plus those of records released or
// forgotten, removed once they outnumber the records).
func (s *Store) Held() (records, queued int) {
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		r, q := sh.held()
		sh.mu.Unlock()
		records += r
		queued += q
	}
	return records, queued
}

// Len returns how many records (in progress or completed, not yet removed)
// the store holds.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += len(sh.records)
		sh.mu.Unlock()
	}
	return n
}

func (s *Store) shardOf(key string) *shard {
	return &s.shards[keyshard.Hash(key)%shardCount]
}

func (s *Store) check(ctx context.Context, key string) error {
	if s.closed.Load() {
		return store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return store.ValidateKey(key)
}

// ceilDiv returns a/b rounded up, for positive a and b, without the overflow
// of (a+b-1)/b near math.MaxInt.
func ceilDiv(a, b int) int {
	q := a / b
	if a%b != 0 {
		q++
	}
	return q
}
