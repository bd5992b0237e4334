// Package pgstore is a [store.Store] on PostgreSQL, through a
// github.com/jackc/pgx/v5 connection pool the caller owns: idempotency
// records kept in one table of the caller's database. Package pgtx commits a
// function's own work in that database with its record, in one transaction,
// through Store.CompleteIn.
//
// Each transition is one SQL statement whose conditions (state, owner,
// fence, lease end, record end) sit in its WHERE clause, with every time
// taken from the database clock (clock_timestamp(), read once per
// statement), never from a client. A claim is one INSERT ... ON CONFLICT DO
// UPDATE that answers claimed, completed (with the record) or in progress
// (with the lease left) in the same round trip; docs/postgres.md ("The
// claim") says how it answers when its DO UPDATE does not fire, and why a
// claim that races another is sometimes sent twice. Keys, owners,
// fingerprints and results are bytea: any key the contract allows and any
// value round-trip unchanged. A row the store cannot read is a
// *CorruptError naming the key.
//
// The ops of a batch (the runtime's group commit) go out as one pgx.Batch:
// one round trip and one transaction, whose commit the whole batch shares.
// Statements run in key order, so two batches never wait on each other's
// rows in a cycle, and answers are given only once the transaction has
// committed. A batch that the server refuses (an error rolls back all of
// it) is sent again op by op, so that one bad row fails only its own op.
// A batch whose reply is lost (a dropped connection, a deadline) may or
// may not have committed: the store sends again, a few times, the claims,
// renewals and gets in it, whose repeat answers truly, and gives the other
// ops the error, as the Redis store does.
//
// Rows end: a completed key's after its TTL, a claim's after its lease and
// then its TTL (so that a takeover finds the row: it raises the fence and
// counts one more attempt). A claim that creates a key's record takes its
// fence from the database clock (microseconds since 2025-01-01 UTC), or
// the fence of the row it replaces + 1 if larger; a takeover the fence + 1
// or that floor. So fences never go back for a key as long as the
// database clock does not (docs/postgres.md, "Fences").
// Rows past their end are absent to every operation, and are deleted in
// bounded batches by [Store.Cleanup], which a background loop runs every
// minute unless Options.DisableCleanup is set; an index on the end time
// keeps that cheap.
//
// It implements [store.Batcher], [store.Waker], [store.Inspector] and
// [store.Scanner]. Waiters on other instances are woken by NOTIFY: a claim
// that finds the key in progress adds its instance's channel to the row,
// in the same statement, and the statement that completes or releases the
// key notifies those channels only, with a digest of the key (never the
// key) as the payload. Each store listens on one connection of its own,
// taken from the pool, which reconnects when it drops and then reports
// wake-up "" (notifications sent while it was away are lost), so the
// runtime checks every key it waits on; the runtime's lease-aware re-claim
// timer covers the rest.
//
// It implements [store.Invalidator] on the same connection: the forget
// statement notifies the table's invalidation channel with the key it
// deleted (in hex: unlike a wake-up, the key itself), so that every
// runtime on the table drops it from its cache (see invalidate.go).
//
// Call [Store.Migrate] once to create or upgrade the table, or run the SQL
// printed in docs/postgres.md with your own migrations. See that document
// for the schema, the isolation level, cleanup, failure modes and
// measured throughput.
package pgstore

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem/store"
)

// Store is the PostgreSQL store. Create it with [New] and end it with
// [Store.Close].
type Store struct {
	pool    *pgxpool.Pool
	names   names
	q       queries
	timeout time.Duration
	// lockTimeout is set for every batch's transaction (Options.LockTimeout),
	// as set_config's text.
	lockTimeout string
	lockWait    time.Duration

	cleanupBatch int
	stopCleanup  context.CancelFunc
	cleanupDone  chan struct{}

	mu       sync.Mutex
	closed   bool
	listener *listener // nil until the first Subscribe
	subs     map[string]*subscription
	// invalChannel is the table's invalidation channel (invalidate.go).
	invalChannel string

	idMu sync.Mutex
	id   *dbIdentity // the database's identity, once read (SameDatabase)
	// finishIn is the finish statement with the table named by its
	// schema, once resolved (CompleteIn).
	finishIn string
}

var (
	_ store.Store       = (*Store)(nil)
	_ store.Batcher     = (*Store)(nil)
	_ store.Waker       = (*Store)(nil)
	_ store.Inspector   = (*Store)(nil)
	_ store.Scanner     = (*Store)(nil)
	_ store.Invalidator = (*Store)(nil)
)

// New returns a Store on pool, which stays the caller's to close (after
// the store's Close). It checks that the server answers (waiting at most
// Options.Timeout, or 10s, when ctx has no deadline), that its transactions
// run at READ COMMITTED, and that the table, if it exists already, is not
// of a newer schema than this package knows; it does not create the table:
// call Migrate. Options.Schema and Options.Table are quoted; a name that
// PostgreSQL cannot hold is an ErrInvalidArgument.
func New(ctx context.Context, pool *pgxpool.Pool, opts Options) (*Store, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: pgstore.New with a nil pool", store.ErrInvalidArgument)
	}
	if err := opts.validate(); err != nil {
		return nil, err
	}
	n, err := newNames(opts.Schema, opts.Table)
	if err != nil {
		return nil, err
	}
	s := &Store{pool: pool, names: n, q: buildQueries(n.table), timeout: opts.Timeout,
		cleanupBatch: opts.CleanupBatch, subs: map[string]*subscription{}, invalChannel: invalChannelOf(n.table)}
	if s.cleanupBatch == 0 {
		s.cleanupBatch = defaultCleanupBatch
	}
	s.lockWait = opts.LockTimeout
	if s.lockWait == 0 {
		s.lockWait = defaultLockTimeout
	}
	s.lockTimeout = fmt.Sprintf("%dms", max(1, s.lockWait.Milliseconds()))
	if _, ok := ctx.Deadline(); !ok {
		wait := opts.Timeout
		if wait == 0 {
			wait = defaultNewTimeout
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, wait)
		defer cancel()
	}
	if err := s.check(ctx); err != nil {
		return nil, err
	}
	if !opts.DisableCleanup {
		every := opts.CleanupInterval
		if every == 0 {
			every = defaultCleanupInterval
		}
		s.startCleanup(every)
	}
	return s, nil
}

// check asks the server for its transaction isolation and the table's
// schema version.
func (s *Store) check(ctx context.Context) error {
	var iso string
	var comment *string
	err := s.pool.QueryRow(ctx, `SELECT current_setting('transaction_isolation'),
		obj_description(to_regclass($1), 'pg_class')`, s.names.table).Scan(&iso, &comment)
	if err != nil {
		return fmt.Errorf("pgstore: cannot reach PostgreSQL: %w", err)
	}
	if iso != "read committed" {
		return fmt.Errorf("pgstore: the pool's transactions run at %s; the store needs read committed "+
			"(PostgreSQL's default: check default_transaction_isolation of the role, database and pool)", iso)
	}
	if comment == nil {
		return nil // no table yet: Migrate creates it
	}
	if v, ok := parseVersion(*comment); ok && v > schemaVersion {
		return fmt.Errorf("pgstore: table %s is at schema version %d, newer than this package's %d: upgrade the package", s.names.table, v, schemaVersion)
	}
	return nil
}

// Table returns the table's name as the store writes it in SQL: quoted,
// and schema-qualified when Options.Schema is set.
func (s *Store) Table() string { return s.names.table }

// Close stops the store's background cleanup and its wake-up
// subscriptions (and their listening connection), and waits until they
// are done. It does not close the pool, which belongs to the caller. It is
// idempotent; the store's operations fail with store.ErrClosed after it.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	subs := make([]*subscription, 0, len(s.subs))
	for _, sub := range s.subs {
		subs = append(subs, sub)
	}
	s.mu.Unlock()
	for _, sub := range subs {
		sub.stop()
	}
	if s.stopCleanup != nil {
		s.stopCleanup()
		<-s.cleanupDone
	}
	return nil
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

var errClosed = fmt.Errorf("pgstore: %w", store.ErrClosed)

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

// withTimeout bounds ctx by Options.Timeout.
func (s *Store) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if s.timeout > 0 {
		return context.WithTimeout(ctx, s.timeout)
	}
	return ctx, func() {}
}
