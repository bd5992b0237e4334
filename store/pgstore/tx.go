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
// lock_timeout to hold (rounded up to a millisecond, and at most about
// 24.8 days, PostgreSQL's longest): the server ends a transaction idle for
// longer, which rolls it back. Both statements go out in one round trip. The statement names the store's table by the schema
// the store's own pool finds it in (resolved once, when Options.Schema is
// not set), so that tx's search_path cannot lead it to another table.
//
// tx must run at READ COMMITTED (PostgreSQL's default), as the store's own
// statements do: a stricter isolation's snapshot may predate the claim,
// and the statement would not see the key's row. CompleteIn refuses
// another isolation with an error wrapping store.ErrInvalidArgument. On
// any error, the caller must roll tx back (to a savepoint taken before
// CompleteIn will do): the statement may have run.
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
	var err error
	if c.sql, err = s.qualifiedFinish(ctx); err != nil {
		return store.Record{}, err
	}
	// PostgreSQL takes at most maxTimeout; a longer hold (half of a lease
	// of more than seven weeks) would fail every completion.
	ms := strconv.FormatInt(int64((min(hold, maxTimeout)+time.Millisecond-1)/time.Millisecond), 10) + "ms"
	b := &pgx.Batch{}
	b.Queue(`SELECT set_config('idle_in_transaction_session_timeout', $1, true),
		set_config('statement_timeout', $1, true), set_config('lock_timeout', $1, true),
		current_setting('transaction_isolation')`, ms)
	b.Queue(c.sql, c.args...)
	br := tx.SendBatch(ctx, b)
	var iso string
	err = br.QueryRow().Scan(nil, nil, nil, &iso)
	if err == nil && iso != "read committed" {
		err = fmt.Errorf("%w: the transaction runs at %s; a completion in it needs read committed",
			store.ErrInvalidArgument, iso)
	}
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

// qualifiedFinish returns the finish statement CompleteIn sends: with the
// table named by its schema, as the store's own pool resolves it, so that a
// caller's transaction with another search_path (another role, a pool's
// setting) cannot complete a row of another table of the same name.
func (s *Store) qualifiedFinish(ctx context.Context) (string, error) {
	if s.names.schema != "" {
		return s.q.finish, nil
	}
	s.idMu.Lock()
	defer s.idMu.Unlock()
	if s.finishIn != "" {
		return s.finishIn, nil
	}
	var schema, table string
	err := s.pool.QueryRow(ctx, `SELECT n.nspname, c.relname FROM pg_class c
		JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.oid = to_regclass($1)`, s.names.table).Scan(&schema, &table)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", fmt.Errorf("pgstore: the store's pool finds no table %s (call Migrate)", s.names.table)
	}
	if err != nil {
		return "", fmt.Errorf("pgstore: find the schema of table %s: %w", s.names.table, err)
	}
	s.finishIn = buildQueries(pgx.Identifier{schema, table}.Sanitize()).finish
	return s.finishIn, nil
}

// SameDatabase checks that db reaches the store's database: the same
// database (current_database()) of the same server (its system
// identifier, where both sides' roles may read it, else the server's start
// time). A transaction on another database could not commit a record with
// the work it protects; the error wraps ErrOtherDatabase then. The store's
// side is read once (and again when it differs, in case the server
// restarted since).
func (s *Store) SameDatabase(ctx context.Context, db Querier) error {
	if db == nil {
		return fmt.Errorf("%w: pgstore.SameDatabase with nil", store.ErrInvalidArgument)
	}
	theirs, err := identify(ctx, db)
	if err != nil {
		return err
	}
	for fresh := false; ; fresh = true {
		mine, err := s.identity(ctx, fresh)
		if err != nil {
			return err
		}
		if mine.same(theirs) {
			return nil
		}
		if fresh {
			return fmt.Errorf("%w: it is %s, the store's is %s", ErrOtherDatabase, theirs, mine)
		}
	}
}

// identity returns the store's database identity, read once, or again if
// fresh is set.
func (s *Store) identity(ctx context.Context, fresh bool) (dbIdentity, error) {
	s.idMu.Lock()
	defer s.idMu.Unlock()
	if s.id != nil && !fresh {
		return *s.id, nil
	}
	id, err := identify(ctx, s.pool)
	if err == nil {
		s.id = &id
	}
	return id, err
}

// dbIdentity names a database of a server.
type dbIdentity struct {
	name    string // current_database()
	system  string // the server's system identifier; "" when the role may not read it
	started string // when the server started, in UTC to the microsecond
}

// same reports whether i and o name the same database of the same server:
// by system identifier when both have it, else by start time.
func (i dbIdentity) same(o dbIdentity) bool {
	if i.name != o.name {
		return false
	}
	if i.system != "" && o.system != "" {
		return i.system == o.system
	}
	return i.started == o.started
}

func (i dbIdentity) String() string {
	if i.system != "" {
		return fmt.Sprintf("database %q of server %s (started %s)", i.name, i.system, i.started)
	}
	return fmt.Sprintf("database %q of the server started %s", i.name, i.started)
}

// identify names the database db reaches. The system identifier is read
// only where the role may call pg_control_system(): a query that names
// the function fails without that right, whatever its branches.
func identify(ctx context.Context, db Querier) (dbIdentity, error) {
	var id dbIdentity
	var mayRead bool
	err := db.QueryRow(ctx, `SELECT current_database(), to_char(pg_postmaster_start_time() AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US'),
		has_function_privilege('pg_control_system()', 'EXECUTE')`).Scan(&id.name, &id.started, &mayRead)
	if err == nil && mayRead {
		err = db.QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&id.system)
	}
	if err != nil {
		return dbIdentity{}, fmt.Errorf("pgstore: identify the database: %w", err)
	}
	return id, nil
}
