package pgtx

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"
	"weak"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/ownerhook"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
)

// Do runs fn once for key, as [idem.Do] does, with fn's work and the key's
// result committed in one transaction on pool: fn gets the transaction, and
// the key's record is completed in it as its last statement before COMMIT
// (see the package documentation for what that guarantees, and how errors
// are handled). tx's Commit and Rollback return an error to fn: its end is
// Do's.
//
// pool must reach the runtime's store's database, but should not be the
// pool the store uses: fn's transaction holds a connection for as long as
// fn runs, and would starve the store's renewals and claims.
//
// Do takes the options idem.Do takes. A call that finds the key completed
// replays its result without running fn or opening a transaction.
func Do[T any](ctx context.Context, rt *idem.Runtime, pool *pgxpool.Pool, key string,
	fn func(ctx context.Context, tx pgx.Tx) (T, error), opts ...idem.CallOption) (T, error) {
	var zero T
	if pool == nil {
		return zero, fmt.Errorf("%w: pgtx.Do with a nil pool", idem.ErrInvalidArgument)
	}
	if fn == nil {
		return zero, fmt.Errorf("%w: pgtx.Do with a nil function", idem.ErrInvalidArgument)
	}
	st, err := storeOf(rt)
	if err != nil {
		return zero, err
	}
	if err := checkedPool(ctx, st, pool); err != nil {
		return zero, err
	}
	r := &run{st: st, key: key}
	return idem.Do(ctx, rt, key, func(ctx context.Context) (T, error) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			return zero, fmt.Errorf("pgtx: begin a transaction for %q: %w", key, err)
		}
		v, keep, err := inTx(ctx, tx, fn)
		if keep {
			r.tx, r.keptErr = tx, err != nil
		}
		return v, err
	}, withCompleter(opts, r)...)
}

// inTx runs fn in tx and reports whether tx is to be kept for the
// completion: after a value, or an error marked by KeepWork. Otherwise (an
// error, a panic, runtime.Goexit) tx has been rolled back.
func inTx[T any](ctx context.Context, tx pgx.Tx, fn func(context.Context, pgx.Tx) (T, error)) (v T, keep bool, err error) {
	returned := false
	defer func() {
		if !returned || !keep {
			rollback(ctx, tx)
		}
	}()
	v, err = fn(ctx, fnTx{tx})
	returned = true
	var kw *keptError
	keep = err == nil || errors.As(err, &kw)
	return v, keep, err
}

// fnTx is the transaction a function gets: tx, whose end is pgtx's. A
// COMMIT by the function would commit its work without the key's record,
// and the key, released, would run the function again; a ROLLBACK (a
// habitual defer tx.Rollback) would fail the completion. Both are refused.
// Savepoints (Begin) are the function's to end.
type fnTx struct{ pgx.Tx }

// errEndsTx is what Commit and Rollback return to a function.
var errEndsTx = errors.New("pgtx: the function's transaction ends with the key's record: pgtx commits or rolls it back, not the function")

func (fnTx) Commit(context.Context) error   { return errEndsTx }
func (fnTx) Rollback(context.Context) error { return errEndsTx }

// rollback rolls tx back, even once ctx has ended. Its error is of no use:
// a transaction that cannot be rolled back ends with its connection.
func rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	_ = tx.Rollback(ctx)
}

// withCompleter returns opts with the option that has r store the owner's
// result.
func withCompleter(opts []idem.CallOption, c ownerhook.Completer) []idem.CallOption {
	out := make([]idem.CallOption, 0, len(opts)+1)
	out = append(out, opts...)
	return append(out, ownerhook.Option(c).(idem.CallOption))
}

// run is one call of Do: the transaction fn ran in, for the completion.
type run struct {
	st  *pgstore.Store
	key string
	tx  pgx.Tx // nil when fn's work was rolled back
	// keptErr: fn returned an error marked by KeepWork, to commit with its
	// work.
	keptErr bool
}

// Complete implements ownerhook.Completer: the record is completed in fn's
// transaction, which then commits.
func (r *run) Complete(tok store.Token, rec store.Record, ttl, hold time.Duration) (store.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*hold+5*time.Second)
	defer cancel()
	stored, err := completeIn(ctx, r.st, r.tx, r.key, r.keptErr, tok, rec, ttl, hold)
	if err != nil {
		return store.Record{}, err
	}
	if afterStatement != nil {
		afterStatement()
	}
	if err := r.tx.Commit(ctx); err != nil {
		return settle(r.st, r.key, tok, err, hold)
	}
	return stored, nil
}

// completeIn runs the completion statement in tx, the last statement of
// fn's work. It rolls tx back when the statement fails, and when fn's work
// is not kept (there is no transaction, or fn failed in a way whose work is
// dropped): then the error is stored alone, by the runtime, which keeps it
// through a store outage as it keeps any result. A tx that is a savepoint
// rolls back to it: fn's work goes, the caller's stays.
func completeIn(ctx context.Context, st *pgstore.Store, tx pgx.Tx, key string, keptErr bool, tok store.Token, rec store.Record, ttl, hold time.Duration) (store.Record, error) {
	if tx != nil && rec.Failed && aborted(tx) {
		// A statement of fn's failed (a unique violation it answered
		// with KeepWork(err), most often): the server would refuse the
		// completion, and there is no work left to keep. The error is
		// still the key's result, stored alone.
		keptErr = false
	}
	if tx == nil || rec.Failed && !keptErr {
		if tx != nil {
			rollback(ctx, tx)
		}
		return store.Record{}, ownerhook.ErrByStore
	}
	stored, err := st.CompleteIn(ctx, tx, key, tok, rec, ttl, hold)
	if err != nil {
		rollback(ctx, tx)
		return store.Record{}, err
	}
	return stored, nil
}

// settle decides what a transaction whose COMMIT failed came to: a COMMIT
// the server refused rolled back; one whose reply was lost is read back.
func settle(st *pgstore.Store, key string, tok store.Token, commitErr error, hold time.Duration) (store.Record, error) {
	if errors.Is(commitErr, pgx.ErrTxCommitRollback) {
		return store.Record{}, fmt.Errorf("pgtx: %q: the transaction rolled back at COMMIT: %w", key, commitErr)
	}
	return readBack(st, key, tok, commitErr, hold)
}

// afterStatement, when set (by tests), runs between the completion
// statement and COMMIT.
var afterStatement func()

// storeOf returns the runtime's store, which must be a *pgstore.Store.
func storeOf(rt *idem.Runtime) (*pgstore.Store, error) {
	if rt == nil {
		return nil, fmt.Errorf("%w: pgtx on a nil *idem.Runtime", idem.ErrInvalidArgument)
	}
	s := ownerhook.StoreOf(rt)
	st, ok := s.(*pgstore.Store)
	if !ok {
		return nil, fmt.Errorf("%w: pgtx needs a runtime on a *pgstore.Store; this one's store is %T", idem.ErrInvalidArgument, s)
	}
	return st, nil
}

// sameDB remembers the pools and connections found to reach their store's
// database, by store and address: the check costs a round trip. A store is
// held weakly, and its addresses go when it is collected, so that a
// program that opens many stores does not keep them all.
var sameDB sync.Map // weak.Pointer[pgstore.Store] → *sync.Map of address → struct{}

// seen reports whether st's address addr passed the check.
func seen(st *pgstore.Store, addr string) bool {
	m, ok := sameDB.Load(weak.Make(st))
	if !ok {
		return false
	}
	_, ok = m.(*sync.Map).Load(addr)
	return ok
}

// remember records that st's address addr passed the check.
func remember(st *pgstore.Store, addr string) {
	w := weak.Make(st)
	m, loaded := sameDB.LoadOrStore(w, new(sync.Map))
	if !loaded {
		runtime.AddCleanup(st, func(w weak.Pointer[pgstore.Store]) { sameDB.Delete(w) }, w)
	}
	m.(*sync.Map).Store(addr, struct{}{})
}

// checkedPool checks once per store, address and isolation setting that
// pool reaches st's database and that its transactions begin at READ
// COMMITTED: the completion refuses any other (see pgstore.CompleteIn),
// and finding out there, after fn's work and its effects outside the
// database, would release the key for a rerun that fails the same way.
// (A connection's own setting, by an AfterConnect hook, is not seen here:
// the completion still refuses it.)
func checkedPool(ctx context.Context, st *pgstore.Store, pool *pgxpool.Pool) error {
	cfg := pool.Config().ConnConfig
	addr := fmt.Sprintf("%s|%d|%s|%s|%s", cfg.Host, cfg.Port, cfg.Database, cfg.User,
		cfg.RuntimeParams["default_transaction_isolation"])
	if seen(st, addr) {
		return nil
	}
	if err := st.SameDatabase(ctx, pool); err != nil {
		return fmt.Errorf("pgtx: %w", err)
	}
	var iso string
	if err := pool.QueryRow(ctx, `SELECT current_setting('default_transaction_isolation')`).Scan(&iso); err != nil {
		return fmt.Errorf("pgtx: read the pool's default isolation: %w", err)
	}
	if iso != "read committed" {
		return fmt.Errorf("%w: pgtx.Do on a pool whose transactions run at %s; the completion needs read committed (default_transaction_isolation)",
			idem.ErrInvalidArgument, iso)
	}
	remember(st, addr)
	return nil
}

// checked checks once per store and address that db reaches st's
// database.
func checked(ctx context.Context, st *pgstore.Store, cfg *pgx.ConnConfig, db pgstore.Querier) error {
	addr := fmt.Sprintf("%s|%d|%s|%s", cfg.Host, cfg.Port, cfg.Database, cfg.User)
	if seen(st, addr) {
		return nil
	}
	if err := st.SameDatabase(ctx, db); err != nil {
		return fmt.Errorf("pgtx: %w", err)
	}
	remember(st, addr)
	return nil
}

// aborted reports whether tx is in a failed transaction block: a statement
// in it failed, and the server refuses every other until it is rolled back
// (to a savepoint, for one). The connection knows it from the server's
// last reply; no round trip.
func aborted(tx pgx.Tx) bool {
	c := tx.Conn()
	return c != nil && c.PgConn().TxStatus() == 'E'
}
