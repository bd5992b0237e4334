// Package memstore is idem's default store: an in-process [store.Store] that
// keeps every key in memory.
//
// It is sharded by key hash, takes one short critical section per operation,
// and expires records lazily: every operation also removes a few records
// whose time has passed (kept in FIFO queues, one per distinct TTL, so that
// each queue is already in time order), so it needs no goroutine per key,
// nor a background one.
// Fencing tokens come from one counter for the whole store, so they increase
// per key even after a key has expired and been claimed again.
//
// A claim in progress does not expire by time: its lease ending matters only
// once another claim takes the key over, so a slow owner that nobody
// replaced still completes its key, however long it took.
//
// Memory is bounded: past Options.MaxRecords, a new claim evicts a claim in
// progress that outlived its lease and result TTL (its owner is most likely
// gone), else the completed record closest to its expiry, so a process that
// sees more distinct keys than that within a result TTL replays only the
// most recent ones. [Store.Evicted] counts evictions.
//
// It implements [store.Waker]: runtimes that share one Store (in one process)
// wake each other's waiters the way Redis pub/sub does across processes.
// Nothing survives the process.
package memstore

import (
	"bytes"
	"context"
	"strconv"
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
}

// DefaultMaxRecords is the default of Options.MaxRecords.
const DefaultMaxRecords = 1 << 20

// Store is the in-memory store. Create it with [New]; it is safe for
// concurrent use.
type Store struct {
	clock    clock.Clock
	fence    atomic.Uint64
	closed   atomic.Bool
	perShard int
	evicted  atomic.Int64
	shards   [shardCount]shard

	subMu  sync.RWMutex
	subs   map[string]func(string)
	subSeq atomic.Uint64
}

var (
	_ store.Store     = (*Store)(nil)
	_ store.InProcess = (*Store)(nil)
	_ store.Waker     = (*Store)(nil)
)

type shard struct {
	mu      sync.Mutex
	records map[string]*record
	expiry  expiryQueues
	// abandoned lists claims in progress past lease + TTL, oldest first:
	// the first records evicted when space is needed (see evictOne).
	abandoned []expiryItem
}

const (
	inProgress uint8 = iota + 1
	completed
)

type record struct {
	state      uint8
	token      store.Token
	leaseUntil time.Time
	lease      time.Duration
	ttl        time.Duration
	fp         []byte
	rec        store.Record
	removeAt   time.Time
	waiters    []string
	listed     bool // in its shard's abandoned list
}

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
	s := &Store{clock: c, subs: make(map[string]func(string)), perShard: ceilDiv(limit, shardCount)}
	for i := range s.shards {
		s.shards[i].records = make(map[string]*record)
	}
	return s
}

// InProcess marks the store as one that never waits on I/O.
func (s *Store) InProcess() {}

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

// live returns the key's record unless it has expired, removing due records.
// A record in progress never expires by time: its lease ending matters only
// once another claim takes the key over, so a slow owner that nobody
// replaced can still complete it.
func (sh *shard) live(key string, now time.Time) *record {
	sh.sweep(now, 4)
	r := sh.records[key]
	if r != nil && r.state == completed && !now.Before(r.removeAt) {
		delete(sh.records, key)
		return nil
	}
	return r
}

// sweep removes at most n records per queue whose removal time has passed.
func (sh *shard) sweep(now time.Time, n int) {
	for _, q := range sh.expiry {
		for i := 0; i < n; i++ {
			it, ok := q.popDue(now)
			if !ok {
				break
			}
			r := sh.records[it.key]
			if r != it.rec {
				continue
			}
			if now.Before(r.removeAt) {
				// Renewed, taken over or completed since the item was
				// pushed: its removal moved later.
				q.push(expiryItem{at: r.removeAt.UnixNano(), key: it.key, rec: r})
				continue
			}
			if r.state != completed {
				// A claim in progress past lease + TTL: kept until it is
				// completed, released or taken over (see live), or evicted
				// first when space is needed. It has no queue item from now
				// on; the next setRemoveAt gives it one.
				r.removeAt = time.Time{}
				sh.addAbandoned(it)
				continue
			}
			delete(sh.records, it.key)
		}
	}
}

// addAbandoned remembers a claim in progress that outlived its lease and
// TTL. The list is pruned of claims since completed, released or taken over
// each time its length doubles, so it stays within twice the live ones.
func (sh *shard) addAbandoned(it expiryItem) {
	if it.rec.listed {
		return // still listed from an earlier time it was abandoned
	}
	if n := len(sh.abandoned); n >= 64 && n&(n-1) == 0 {
		kept := sh.abandoned[:0]
		for _, a := range sh.abandoned {
			if sh.isAbandoned(a) {
				kept = append(kept, a)
			} else {
				a.rec.listed = false
			}
		}
		clear(sh.abandoned[len(kept):])
		sh.abandoned = kept
	}
	it.rec.listed = true
	sh.abandoned = append(sh.abandoned, it)
}

// isAbandoned reports whether it still names a claim in progress past its
// removal time that nothing has touched since.
func (sh *shard) isAbandoned(it expiryItem) bool {
	r := sh.records[it.key]
	return r == it.rec && r.state == inProgress && r.removeAt.IsZero()
}

// evictOne makes room for a new record. It removes, first, the oldest claim
// in progress that outlived its lease and TTL with nobody taking it over
// (its owner is most likely gone; if not, its Complete is refused as a
// takeover's would be), else the completed record whose removal is nearest
// among the queue heads. Heads in progress are moved to the back of their
// queue, at most a few per call. It reports whether it removed a record.
func (sh *shard) evictOne() bool {
	for len(sh.abandoned) > 0 {
		it := sh.abandoned[0]
		sh.abandoned[0] = expiryItem{}
		sh.abandoned = sh.abandoned[1:]
		it.rec.listed = false
		if sh.isAbandoned(it) {
			delete(sh.records, it.key)
			return true
		}
	}
	var best *expiryQueue
	for _, q := range sh.expiry {
		for rotated := 0; q.head < len(q.items) && rotated < 16; {
			it := q.items[q.head]
			if sh.records[it.key] != it.rec {
				q.drop() // stale: the record is gone or replaced
				continue
			}
			if it.rec.state != completed {
				q.drop()
				q.push(it)
				rotated++
				continue
			}
			if best == nil || it.at < best.items[best.head].at {
				best = q
			}
			break
		}
	}
	if best == nil {
		return false
	}
	it := best.items[best.head]
	best.drop()
	delete(sh.records, it.key)
	return true
}

// setRemoveAt schedules r's removal d after now. A queue item is added when
// the time moves earlier by more than a lease (a Complete moves it a little
// earlier than its claim did: the old item then removes it a little late,
// which costs some memory but no correctness, since live checks every record
// it reads); moving it later needs none: the old item is re-queued when it
// falls due.
func (sh *shard) setRemoveAt(key string, r *record, now time.Time, d time.Duration) {
	at := now.Add(d)
	push := r.removeAt.IsZero() || at.Add(r.lease).Before(r.removeAt)
	r.removeAt = at
	if push {
		sh.expiry.queue(d).push(expiryItem{at: at.UnixNano(), key: key, rec: r}) // durations are at most 100 years: no overflow
	}
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

// Claim implements [store.Store].
func (s *Store) Claim(ctx context.Context, key string, req store.ClaimRequest) (store.ClaimResult, error) {
	if err := s.check(ctx, key); err != nil {
		return store.ClaimResult{}, err
	}
	if err := invalidClaim(req); err != nil {
		return store.ClaimResult{}, err
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.clock.Now()
	r := sh.live(key, now)
	switch {
	case r == nil:
		if len(sh.records) >= s.perShard && sh.evictOne() {
			s.evicted.Add(1)
		}
		r = &record{}
		sh.records[key] = r
		s.take(sh, key, r, req, now)
		return store.ClaimResult{Status: store.Claimed, Token: r.token, LeaseLeft: req.Lease}, nil
	case r.state == completed:
		return store.ClaimResult{Status: store.Completed, Record: r.rec}, nil
	case r.token.Owner == req.Owner:
		return store.ClaimResult{Status: store.Claimed, Token: r.token, LeaseLeft: r.leaseUntil.Sub(now)}, nil
	case now.Before(r.leaseUntil):
		if req.Waiter != "" && !contains(r.waiters, req.Waiter) {
			r.waiters = append(r.waiters, req.Waiter)
		}
		return store.ClaimResult{
			Status:      store.InProgress,
			Token:       store.Token{Fence: r.token.Fence},
			LeaseLeft:   r.leaseUntil.Sub(now),
			Fingerprint: r.fp,
		}, nil
	default:
		s.take(sh, key, r, req, now)
		return store.ClaimResult{Status: store.Claimed, Token: r.token, Takeover: true, LeaseLeft: req.Lease}, nil
	}
}

func (s *Store) take(sh *shard, key string, r *record, req store.ClaimRequest, now time.Time) {
	r.state = inProgress
	r.token = store.Token{Fence: s.fence.Add(1), Owner: req.Owner}
	r.leaseUntil = now.Add(req.Lease)
	r.lease, r.ttl = req.Lease, req.TTL
	r.fp = cloneBytes(req.Fingerprint)
	sh.setRemoveAt(key, r, now, req.Lease+req.TTL)
}

// holder returns the key's in-progress record if tok holds it.
func (sh *shard) holder(key string, tok store.Token, now time.Time) (*record, error) {
	r := sh.live(key, now)
	if r == nil || r.state != inProgress || r.token != tok {
		return nil, store.ErrLeaseLost
	}
	return r, nil
}

// Complete implements [store.Store].
func (s *Store) Complete(ctx context.Context, key string, tok store.Token, rec store.Record, ttl time.Duration) (store.Record, error) {
	if err := s.check(ctx, key); err != nil {
		return store.Record{}, err
	}
	if err := store.CheckDuration("ttl", ttl); err != nil {
		return store.Record{}, err
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	now := s.clock.Now()
	if r := sh.live(key, now); r != nil && r.state == completed && r.rec.Token == tok {
		out := r.rec
		sh.mu.Unlock()
		return out, nil
	}
	r, err := sh.holder(key, tok, now)
	if err != nil {
		sh.mu.Unlock()
		return store.Record{}, err
	}
	r.state = completed
	r.rec = store.Record{
		Value:       cloneBytes(rec.Value),
		Failed:      rec.Failed,
		Error:       rec.Error,
		Fingerprint: r.fp,
		CreatedAt:   now,
		ExpiresAt:   now.Add(ttl),
		Token:       tok,
	}
	if !bytes.Equal(rec.Fingerprint, r.fp) {
		r.rec.Fingerprint = cloneBytes(rec.Fingerprint)
	}
	r.fp = nil
	sh.setRemoveAt(key, r, now, ttl)
	waiters := r.waiters
	r.waiters = nil
	out := r.rec
	sh.mu.Unlock()
	s.notify(key, waiters)
	return out, nil
}

// Release implements [store.Store].
func (s *Store) Release(ctx context.Context, key string, tok store.Token) error {
	if err := s.check(ctx, key); err != nil {
		return err
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	now := s.clock.Now()
	if sh.live(key, now) == nil {
		sh.mu.Unlock()
		return nil
	}
	r, err := sh.holder(key, tok, now)
	if err != nil {
		sh.mu.Unlock()
		return err
	}
	delete(sh.records, key)
	waiters := r.waiters
	sh.mu.Unlock()
	s.notify(key, waiters)
	return nil
}

// Renew implements [store.Store].
func (s *Store) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	if err := s.check(ctx, key); err != nil {
		return err
	}
	if err := store.CheckDuration("lease", lease); err != nil {
		return err
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.clock.Now()
	r, err := sh.holder(key, tok, now)
	if err != nil {
		return err
	}
	r.leaseUntil = now.Add(lease)
	if at := r.leaseUntil.Add(r.ttl); at.After(r.removeAt) {
		sh.setRemoveAt(key, r, now, lease+r.ttl)
	}
	return nil
}

// Get implements [store.Store].
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	if err := s.check(ctx, key); err != nil {
		return store.Record{}, err
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	r := sh.live(key, s.clock.Now())
	if r == nil || r.state != completed {
		return store.Record{}, store.ErrNotFound
	}
	return r.rec, nil
}

// Forget implements [store.Store].
func (s *Store) Forget(ctx context.Context, key string) error {
	if err := s.check(ctx, key); err != nil {
		return err
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	r := sh.live(key, s.clock.Now())
	switch {
	case r == nil:
		return nil
	case r.state == inProgress:
		return store.ErrInProgress
	}
	delete(sh.records, key)
	return nil
}

// Subscribe implements [store.Waker]: fn is called with each key that settles
// while an instance registered under the returned id waits on it.
func (s *Store) Subscribe(_ context.Context, fn func(key string)) (string, func(), error) {
	if s.closed.Load() {
		return "", nil, store.ErrClosed
	}
	id := "mem-" + strconv.FormatUint(s.subSeq.Add(1), 10)
	s.subMu.Lock()
	s.subs[id] = fn
	s.subMu.Unlock()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			s.subMu.Lock()
			delete(s.subs, id)
			s.subMu.Unlock()
		})
	}
	return id, stop, nil
}

func (s *Store) notify(key string, waiters []string) {
	if len(waiters) == 0 {
		return
	}
	s.subMu.RLock()
	fns := make([]func(string), 0, len(waiters))
	for _, w := range waiters {
		if fn := s.subs[w]; fn != nil {
			fns = append(fns, fn)
		}
	}
	s.subMu.RUnlock()
	for _, fn := range fns {
		fn(key)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
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
