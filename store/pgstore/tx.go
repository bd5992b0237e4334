package pgstore

// The store's part in completions that commit with the caller's own work
// (package pgtx): the completion statement run inside the caller's
// transaction, the read that settles a COMMIT whose reply was lost, and the
// check that a pool reaches the store's database.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrt/idem/store"
)

// Querier runs a query: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type Querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// CompleteIn completes key in tx, a transaction of the caller's on the
// store's database, with the statement Complete sends: the record commits,
// and the key's waiters on other instances are notified, when tx commits,
// and not at all if it rolls back. It returns the record as it will be
// stored, or store.ErrLeaseLost when tok no longer holds the key (taken over
// after its lease ended, or ended): the caller must then roll tx back, so
// that its work does not commit either.
//
// The statement locks the key's row until tx ends. So that an owner that
// stalls after it (a paused process, a lost connection) cannot keep the
// key from others past its lease, CompleteIn first sets, for the rest of
// tx, idle_in_transaction_session_timeout, statement_timeout and
// lock_timeout to hold (rounded up to a millisecond): the server ends a
// transaction idle for longer, which rolls it back. Both statements go out
// in one round trip.
//
// tx must run at READ COMMITTED (PostgreSQL's default), as the store's own
// statements do; at a stricter isolation, a row changed since tx began
// fails the statement with a serialization error.
func (s *Store) CompleteIn(ctx context.Context, tx pgx.Tx, key string, tok store.Token, rec store.Record, ttl, hold time.Duration) (store.Record, error) {
	if tx == nil {
		return store.Record{}, fmt.Errorf("%w: pgstore.CompleteIn with a nil transaction", store.ErrInvalidArgument)
	}
	if err := store.CheckDuration("hold", hold); err != nil {
		return store.Record{}, err
	}
	if s.isClosed() {
		return store.Record{}, errClosed
	}
	op := &store.Op{Kind: store.OpComplete, Key: key, Token: tok, Record: rec, TTL: ttl}
	c, ok := s.prepare(op)
	if !ok {
		return store.Record{}, op.Err
	}
	ms := strconv.FormatInt(int64((hold+time.Millisecond-1)/time.Millisecond), 10) + "ms"
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('idle_in_transaction_session_timeout', $1, true),
		set_config('statement_timeout', $1, true), set_config('lock_timeout', $1, true)`, ms)
	b.Queue(c.sql, c.args...)
	br := tx.SendBatch(ctx, b)
	_, err := br.Exec()
	if err == nil {
		err = readCall(br, c)
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil && c.scanErr != nil {
		err = c.scanErr
	}
	if err != nil {
		return store.Record{}, fmt.Errorf("pgstore: complete in the caller's transaction: %w", err)
	}
	// Unsettled means the row changed between the statement's snapshot
	// and its write (see sql.go): sent again, a new statement sees the
	// change. A few times only: under a stricter isolation the snapshot
	// would never move.
	for try := 0; c.decode(time.Now(), s.names.table) == unsettled; try++ {
		if try == 3 {
			return store.Record{}, store.ErrLeaseLost
		}
		rows, err := tx.Query(ctx, c.sql, c.args...)
		if err != nil {
			return store.Record{}, fmt.Errorf("pgstore: complete in the caller's transaction: %w", err)
		}
		if err := readRows(rows, c); err != nil {
			return store.Record{}, fmt.Errorf("pgstore: complete in the caller's transaction: %w", err)
		}
	}
	return op.Result.Record, op.Err
}

// readCall reads the next result of br as c's rows.
func readCall(br pgx.BatchResults, c *call) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	return readRows(rows, c)
}

// readRows reads rows as c's, and closes them.
func readRows(rows pgx.Rows, c *call) error {
	c.w, c.s, c.scanErr = nil, nil, nil
	for rows.Next() {
		via, r, err := scanRow(rows)
		if err != nil {
			c.scanErr = err
			break
		}
		if via == "w" {
			c.w = &r
		} else {
			c.s = &r
		}
	}
	rows.Close()
	if c.scanErr != nil {
		return c.scanErr
	}
	return rows.Err()
}

// CompletedBy reports what a transaction that ran CompleteIn for tok came
// to, once its COMMIT's reply was lost: it waits until no transaction holds
// the key's row (a COMMIT still in flight on the server ends first), then
// returns the key's record if tok completed it, or store.ErrNotFound if it
// did not (the transaction rolled back). Any other error leaves the outcome
// unknown.
func (s *Store) CompletedBy(ctx context.Context, key string, tok store.Token) (store.Record, error) {
	if err := store.ValidateKey(key); err != nil {
		return store.Record{}, err
	}
	if s.isClosed() {
		return store.Record{}, errClosed
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, s.q.getLocked, []byte(key))
	if err != nil {
		return store.Record{}, fmt.Errorf("pgstore: read back %s: %w", key, err)
	}
	c := &call{op: &store.Op{Kind: store.OpGet, Key: key}}
	if err := readRows(rows, c); err != nil {
		return store.Record{}, fmt.Errorf("pgstore: read back %s: %w", key, err)
	}
	c.decode(time.Now(), s.names.table)
	if c.op.Err != nil {
		return store.Record{}, c.op.Err
	}
	if c.op.Result.Record.Token != tok {
		return store.Record{}, store.ErrNotFound
	}
	return c.op.Result.Record, nil
}

// ErrOtherDatabase is returned by SameDatabase when a pool reaches another
// database than the store's.
var ErrOtherDatabase = errors.New("pgstore: not the store's database")

// SameDatabase checks that db reaches the store's database: the same
// database (current_database()) of the same server (its system
// identifier, where the role may read it, else the server's start time and
// port). A transaction on another database could not commit a record with
// the work it protects; the error wraps ErrOtherDatabase then. The store's
// side is read once.
func (s *Store) SameDatabase(ctx context.Context, db Querier) error {
	if db == nil {
		return fmt.Errorf("%w: pgstore.SameDatabase with nil", store.ErrInvalidArgument)
	}
	mine, err := s.identity(ctx)
	if err != nil {
		return err
	}
	theirs, err := identify(ctx, db)
	if err != nil {
		return err
	}
	if mine != theirs {
		return fmt.Errorf("%w: it is %s, the store's is %s", ErrOtherDatabase, theirs, mine)
	}
	return nil
}

// identity returns the store's database identity, read once.
func (s *Store) identity(ctx context.Context) (string, error) {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	if s.id != "" {
		return s.id, nil
	}
	id, err := identify(ctx, s.pool)
	if err == nil {
		s.id = id
	}
	return id, err
}

// identify names the database db reaches.
func identify(ctx context.Context, db Querier) (string, error) {
	var name, server string
	err := db.QueryRow(ctx, `SELECT current_database(),
		CASE WHEN has_function_privilege('pg_control_system()', 'EXECUTE')
		THEN 'system ' || (SELECT system_identifier FROM pg_control_system())::text
		ELSE 'started ' || pg_postmaster_start_time()::text || ' port ' || coalesce(inet_server_port(), 0)::text END`).Scan(&name, &server)
	if err != nil {
		return "", fmt.Errorf("pgstore: identify the database: %w", err)
	}
	return fmt.Sprintf("database %q of server %s", name, server), nil
}
