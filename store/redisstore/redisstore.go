// Package redisstore is a [store.Store] on Redis, single node or Cluster,
// through go-redis v9's redis.UniversalClient.
//
// Each transition is one atomic step on the server, one Lua script
// (claim; finish = complete, permanent failure or release; renew), with
// every write fenced by owner and fence. A record is one string per key
// (format v3, see RecordKey and docs/redis.md) whose expiry, set by the
// server, carries the lease, so leases run on the Redis server's clock;
// its name carries a hash tag, so every call touches one slot of a
// cluster. Fences come from the server's clock too: a claim that creates a
// record takes the microseconds since 2025-01-01 UTC by the server's TIME
// when the claim script runs (the floor), and every later claim of the
// record the fence + 1, or the floor if larger. So a key's fences rise
// across its records whatever the clients' clocks and however long a
// claim takes to reach Redis, as long as the clock of the server that
// holds the key does not go back by more than the time between them (a
// step back, a failover to a replica whose clock is behind; docs/redis.md,
// "Fences"). Batches of operations go out as
// one pipeline; on a cluster client, as one pipeline per master on its node
// client, with the store reloading the slot map itself when a master fails
// (see Store.Partition and docs/redis.md, "Failover"). Scripts are loaded
// at start on every master, and reloaded when a pipeline meets NOSCRIPT (a
// restarted or failed-over node).
//
// go-redis never re-sends a script call whose reply was lost (a read
// timeout, a dropped connection), whatever the client's MaxRetries: another
// client's call may run between the two copies, and the second copy would
// answer for the state it finds, not for what the first did (a Release that
// released the key would answer ErrLeaseLost after someone claimed it). A
// lost reply is the caller's error, except for a Claim, a Renew or a Get:
// the store sends those again itself, a few times, because their repeat
// answers truly (but for a claim's Takeover flag, see store.ClaimResult).
// The runtime repeats a Complete and a Release. MOVED and ASK redirects are
// still followed, and calls that Redis refused before running them
// (TRYAGAIN, LOADING, ...) are sent again.
//
// With Options.WaitReplicas, a claim, renewal or completion that fewer
// replicas confirm is not acknowledged (ErrUnconfirmed), so that a
// failover cannot drop a write the store acknowledged.
//
// It implements [store.Inspector] (one read-only script) and
// [store.Scanner] (SCAN with a MATCH on the prefix, never KEYS; master by
// master on a cluster): a record's Redis key holds its key, escaped, as the
// hash tag (see [Store.RecordKey]).
//
// Waiters on other instances are woken by pub/sub: a claim that finds the key
// in progress registers its instance in the record's waiter set, in the same
// script; the finish script PUBLISHes to the inbox channel of each registered
// instance only. Pub/sub drops messages while a subscription reconnects, so
// the runtime also re-claims on a timer, and at once when this store reports
// a resubscribe (wake-up "").
//
// It implements [store.Invalidator]: the forget script PUBLISHes the key
// it deleted to one channel every runtime subscribes to, in the same step
// as the delete, so that no instance keeps replaying a forgotten result
// from its cache (see invalidate.go).
//
// See docs/redis.md for the data model, lost replies, what survives which
// failure, and sizing.
package redisstore

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/store"
)

// Options configures a Store. The zero value is valid.
type Options struct {
	// KeyPrefix starts every Redis key and channel of the store.
	// Default: "idem:".
	KeyPrefix string
	// Scope, when set, is applied to every key with store.BuildKey before it
	// is stored, so that several services can share one Redis. The stored
	// key must fit store.MaxKeyLen: a claim of a key longer than
	// Store.MaxKeyLen (the limit less the scope's prefix) fails with
	// store.ErrInvalidKey.
	// Default: none.
	Scope store.Scope
	// Timeout bounds each batch (one pipeline) when the caller's context
	// has no earlier deadline.
	// Default: 0, the caller's context alone.
	Timeout time.Duration
	// WaitReplicas, when positive, makes every pipeline that carries a
	// claim, a renewal or a completion end with WAIT WaitReplicas
	// WaitTimeout on the same connection, and a write that fewer replicas
	// confirm is not acknowledged: a claim is released and answers
	// ErrUnconfirmed (fn never runs on it), a completion or a renewal
	// answers ErrUnconfirmed, which the runtime retries as for an outage.
	// It keeps a failover from dropping acknowledged writes, as long as
	// the promoted replica is one that confirmed them and the lease
	// outlasts the failover; with one replica per master, claims and
	// completions on a master whose replica is down (or on a promoted
	// replica) answer ErrUnconfirmed until a replica joins it
	// (docs/redis.md, "Failover").
	// Default: 0, no wait.
	WaitReplicas int
	// WaitTimeout is WAIT's timeout: how long a write may wait for its
	// replicas before it counts as unconfirmed. It must be shorter than the
	// client's ReadTimeout.
	// Default: 250ms (when WaitReplicas is positive).
	WaitTimeout time.Duration
	// MaxRecordBytes is the largest value the store sends Redis: an
	// operation with a larger argument (a result, its fingerprint) is
	// refused with store.ErrTooLarge before it is sent, since Redis
	// answers it with a protocol error and closes the connection, failing
	// every other operation of its pipeline. The runtime keeps results
	// below it (store.SizeLimited). Set it to the server's
	// proto-max-bulk-len where CONFIG GET is refused; at least 1 MiB.
	// Default: the server's proto-max-bulk-len, read with CONFIG GET when
	// the store is made (on a cluster, the least of its masters'), or
	// DefaultMaxRecordBytes (512 MiB, Redis's default) when CONFIG is
	// refused.
	MaxRecordBytes int
	// MaxBatchBytes bounds the bytes one pipeline sends (the keys and
	// arguments of its operations): a batch over it is sent as several
	// pipelines one after the other, each under it, and an operation
	// larger than it goes alone, so that one large result does not hold
	// up a pipeline of small operations or a read buffer of its size.
	// Default: DefaultMaxBatchBytes (8 MiB).
	MaxBatchBytes int
}

// DefaultMaxBatchBytes is Options.MaxBatchBytes's default.
const DefaultMaxBatchBytes = 8 << 20

// DefaultWaitTimeout is Options.WaitTimeout's default.
const DefaultWaitTimeout = 250 * time.Millisecond

// Stats are counts since the store was made.
type Stats struct {
	// SlotReloads counts the reloads of a cluster client's slot map made
	// by the store (after a MOVED, a refused dial, a lost reply, ...).
	SlotReloads uint64
	// Unconfirmed counts the writes sent (claims, renewals, completions)
	// that fewer than Options.WaitReplicas replicas confirmed.
	Unconfirmed uint64
	// TooLarge counts the operations refused with store.ErrTooLarge,
	// never sent: an argument over Options.MaxRecordBytes.
	TooLarge uint64
	// SplitBatches counts the batches sent as more than one pipeline to
	// keep each under Options.MaxBatchBytes.
	SplitBatches uint64
	// LoneOps counts the operations larger than Options.MaxBatchBytes,
	// each sent in a pipeline of its own.
	LoneOps uint64
}

// Stats returns the store's counts.
func (s *Store) Stats() Stats {
	st := Stats{Unconfirmed: s.nUnconfirmed.Load(), TooLarge: s.nTooLarge.Load(),
		SplitBatches: s.nSplit.Load(), LoneOps: s.nLone.Load()}
	if s.slots != nil {
		st.SlotReloads = s.slots.reloads.Load()
	}
	return st
}

// Counts implements store.Counted: the slot map reloads and the writes
// fewer than WaitReplicas replicas confirmed.
func (s *Store) Counts() []store.Count {
	st := s.Stats()
	return []store.Count{
		{Name: "slot_reloads", Help: "reloads of a cluster client's slot map made by the store", Value: st.SlotReloads},
		{Name: "unconfirmed_writes", Help: "writes fewer than WaitReplicas replicas confirmed", Value: st.Unconfirmed},
		{Name: "too_large", Help: "operations refused unsent, over the server's size limit (MaxRecordBytes)", Value: st.TooLarge},
		{Name: "split_batches", Help: "batches sent as several pipelines to stay under MaxBatchBytes", Value: st.SplitBatches},
		{Name: "lone_ops", Help: "operations over MaxBatchBytes, each sent in a pipeline of its own", Value: st.LoneOps},
	}
}

// Store is the Redis store. Create it with [New].
type Store struct {
	c      redis.UniversalClient
	prefix string
	// scope is store.BuildKey's prefix of Options.Scope ("" without one):
	// the stored key is scope + key.
	scope   string
	timeout time.Duration
	inbox   string
	// slots routes batches on a cluster client (nil on any other client).
	slots *slotMap
	// waitN and waitMs are WAIT's arguments (waitN 0: no WAIT).
	waitN        int
	waitMs       int64
	waitTimeout  time.Duration
	nUnconfirmed atomic.Uint64
	// maxBulk is the largest argument sent (Options.MaxRecordBytes);
	// maxBatch the most bytes one pipeline sends (Options.MaxBatchBytes).
	maxBulk   int
	maxBatch  int
	nTooLarge atomic.Uint64
	nSplit    atomic.Uint64
	nLone     atomic.Uint64

	mu   sync.Mutex
	subs []*subscription
}

var (
	_ store.Store       = (*Store)(nil)
	_ store.Batcher     = (*Store)(nil)
	_ store.Waker       = (*Store)(nil)
	_ store.Partitioner = (*Store)(nil)
	_ store.SizeLimited = (*Store)(nil)
)

// New returns a Store on c (a *redis.Client or a *redis.ClusterClient) and
// loads its scripts on every master. It fails if Redis cannot be reached.
func New(ctx context.Context, c redis.UniversalClient, opts Options) (*Store, error) {
	if c == nil {
		return nil, fmt.Errorf("%w: redisstore.New with a nil client", store.ErrInvalidArgument)
	}
	if opts.Timeout < 0 {
		return nil, fmt.Errorf("%w: redisstore: Timeout %v must not be negative", store.ErrInvalidArgument, opts.Timeout)
	}
	if opts.WaitReplicas < 0 || opts.WaitTimeout < 0 {
		return nil, fmt.Errorf("%w: redisstore: WaitReplicas %d and WaitTimeout %v must not be negative", store.ErrInvalidArgument, opts.WaitReplicas, opts.WaitTimeout)
	}
	if opts.WaitTimeout == 0 {
		opts.WaitTimeout = DefaultWaitTimeout
	}
	if opts.WaitTimeout > store.MaxDuration || opts.Timeout > store.MaxDuration {
		return nil, fmt.Errorf("%w: redisstore: Timeout %v and WaitTimeout %v must be at most %v", store.ErrInvalidArgument, opts.Timeout, opts.WaitTimeout, store.MaxDuration)
	}
	if opts.MaxRecordBytes != 0 && opts.MaxRecordBytes < minRecordBytes {
		return nil, fmt.Errorf("%w: redisstore: MaxRecordBytes %d must be 0 (the server's limit) or at least %d, as Redis's proto-max-bulk-len", store.ErrInvalidArgument, opts.MaxRecordBytes, minRecordBytes)
	}
	if opts.MaxBatchBytes < 0 {
		return nil, fmt.Errorf("%w: redisstore: MaxBatchBytes %d must not be negative", store.ErrInvalidArgument, opts.MaxBatchBytes)
	}
	if opts.MaxBatchBytes == 0 {
		opts.MaxBatchBytes = DefaultMaxBatchBytes
	}
	if rt := readTimeout(c); opts.WaitReplicas > 0 && rt > 0 && opts.WaitTimeout >= rt {
		return nil, fmt.Errorf("%w: redisstore: WaitTimeout %v must be shorter than the client's ReadTimeout %v", store.ErrInvalidArgument, opts.WaitTimeout, rt)
	}
	prefix := opts.KeyPrefix
	if prefix == "" {
		prefix = "idem:"
	}
	if strings.ContainsAny(prefix, "{}") {
		return nil, fmt.Errorf("%w: redisstore: KeyPrefix %q must not contain { or }", store.ErrInvalidArgument, prefix)
	}
	scope := ""
	if opts.Scope != (store.Scope{}) {
		scope = store.BuildKey("", opts.Scope)
	}
	s := &Store{c: c, prefix: prefix, scope: scope,
		timeout: opts.Timeout, inbox: prefix + "inbox:",
		maxBulk: opts.MaxRecordBytes, maxBatch: opts.MaxBatchBytes}
	if s.maxBulk == 0 {
		n, err := maxBulk(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("redisstore: read proto-max-bulk-len: %w", err)
		}
		s.maxBulk = n
	}
	if cc, ok := c.(*redis.ClusterClient); ok {
		s.slots = &slotMap{cc: cc}
	}
	if opts.WaitReplicas > 0 {
		s.waitN, s.waitTimeout = opts.WaitReplicas, opts.WaitTimeout
		s.waitMs = ms(opts.WaitTimeout)
	}
	if err := s.loadScripts(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// readTimeout returns c's ReadTimeout (0: none, or a client of another
// kind).
func readTimeout(c redis.UniversalClient) time.Duration {
	var rt time.Duration
	switch c := c.(type) {
	case *redis.Client:
		rt = c.Options().ReadTimeout
	case *redis.ClusterClient:
		rt = c.Options().ReadTimeout
	}
	return max(rt, 0)
}

// loadScripts loads every script; on a cluster client, on every master.
func (s *Store) loadScripts(ctx context.Context) error {
	for _, sc := range allScripts {
		if err := sc.Load(ctx, s.c).Err(); err != nil {
			return fmt.Errorf("redisstore: load scripts: %w", err)
		}
	}
	return nil
}

// Claim implements [store.Store].
func (s *Store) Claim(ctx context.Context, key string, req store.ClaimRequest) (store.ClaimResult, error) {
	op := &store.Op{Kind: store.OpClaim, Key: key, Claim: req}
	s.Batch(ctx, []*store.Op{op})
	return op.Result, op.Err
}

// Complete implements [store.Store].
func (s *Store) Complete(ctx context.Context, key string, tok store.Token, rec store.Record, ttl time.Duration) (store.Record, error) {
	op := &store.Op{Kind: store.OpComplete, Key: key, Token: tok, Record: rec, TTL: ttl}
	s.Batch(ctx, []*store.Op{op})
	return op.Result.Record, op.Err
}

// Release implements [store.Store].
func (s *Store) Release(ctx context.Context, key string, tok store.Token) error {
	op := &store.Op{Kind: store.OpRelease, Key: key, Token: tok}
	s.Batch(ctx, []*store.Op{op})
	return op.Err
}

// Renew implements [store.Store].
func (s *Store) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	op := &store.Op{Kind: store.OpRenew, Key: key, Token: tok, Lease: lease}
	s.Batch(ctx, []*store.Op{op})
	return op.Err
}

// Get implements [store.Store].
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	op := &store.Op{Kind: store.OpGet, Key: key}
	s.Batch(ctx, []*store.Op{op})
	return op.Result.Record, op.Err
}

// Forget implements [store.Store].
func (s *Store) Forget(ctx context.Context, key string) error {
	op := &store.Op{Kind: store.OpForget, Key: key}
	s.Batch(ctx, []*store.Op{op})
	return op.Err
}
