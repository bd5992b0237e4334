package pgtx

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
)

// Join runs fn once for key, as [Do] does, inside tx: a transaction the
// caller began on the store's database and commits (or rolls back) itself.
// fn runs in a savepoint of tx, and the key's record is completed in tx
// after fn's work; both commit with the caller's COMMIT, or neither does.
//
// The caller must then tell the runtime how its commit ended, with
// [Pending.Settle]: until it does, the key stays held (its waiters wait),
// at most half the lease, after which the runtime reads the record back
// to learn whether tx committed. Settle returns the key's result.
//
// Join returns an error, and no Pending, when nothing of the call waits in
// tx: the key's stored permanent error replayed, a conflict, a lease lost,
// fn's transient error (its work rolled back to the savepoint, the rest of
// tx untouched). fn runs on the caller's goroutine's behalf; the tx it gets
// returns an error from Commit and Rollback (its savepoint's end is
// Join's); tx must not be used by anything else until Join returns. The
// call waits for fn to return even if ctx ends first
// (idem.WithOwnerWaits), since fn uses tx.
//
// A second Join of a key whose first Join in the same tx is not settled
// yet returns an error matching idem.ErrConflict at once: it could only
// wait for a commit that cannot come while the caller waits. (The check
// knows tx by the value given: two savepoints of one transaction, each
// given to a Join of the same key, are not told apart, and the second
// waits until the server ends the idle transaction, half the lease later,
// everything in it rolled back.)
//
// The completion sets idle_in_transaction_session_timeout,
// statement_timeout and lock_timeout to half the lease for the rest of tx
// (see pgstore.Store.CompleteIn): the caller's own statements after Join
// run under them too, and so does an idle wait before its COMMIT.
//
// fn's context is cancelled when the key's lease is lost or the runtime
// closes (see idem.Do). pgx answers a context cancelled during a statement
// by closing the statement's connection: tx then ends, rolled back, the
// caller's own work with it, and its COMMIT fails. Nothing of fn commits
// either, and the key is released.
func Join[T any](ctx context.Context, rt *idem.Runtime, tx pgx.Tx, key string,
	fn func(ctx context.Context, tx pgx.Tx) (T, error), opts ...idem.CallOption) (*Pending[T], error) {
	if tx == nil {
		return nil, fmt.Errorf("%w: pgtx.Join with a nil transaction", idem.ErrInvalidArgument)
	}
	if fn == nil {
		return nil, fmt.Errorf("%w: pgtx.Join with a nil function", idem.ErrInvalidArgument)
	}
	st, err := storeOf(rt)
	if err != nil {
		return nil, err
	}
	if err := checked(ctx, st, tx.Conn().Config(), tx); err != nil {
		return nil, err
	}
	held := heldKey{rt: rt, conn: tx.Conn(), key: key}
	if v, ok := heldInTx.Load(held); ok && sameTx(v.(pgx.Tx), tx) {
		// The key's completion waits in this very transaction for its
		// commit: a second call would wait for that commit, which cannot
		// come while the caller waits, until the server ended the
		// caller's idle transaction (half the lease), everything in it
		// lost.
		return nil, fmt.Errorf("%w: pgtx.Join of %q in a transaction that holds the key's completion already, not yet settled (commit it and Settle first, or use one Join per key in a transaction)",
			idem.ErrConflict, key)
	}
	j := &joined{run: run{st: st, key: key}, held: held, callerTx: tx, ready: make(chan struct{}), commit: make(chan error, 1)}
	p := &Pending[T]{j: j, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		p.v, p.err = idem.Do(ctx, rt, key, func(ctx context.Context) (T, error) {
			sp, err := tx.Begin(ctx) // a savepoint
			if err != nil {
				var zero T
				return zero, fmt.Errorf("pgtx: open a savepoint for %q: %w", key, err)
			}
			v, keep, err := inTx(ctx, sp, fn)
			if keep {
				j.tx, j.keptErr = sp, err != nil
			}
			if err == nil || keep {
				p.pre = v
			}
			return v, err
		}, withCompleter(append(opts[:len(opts):len(opts)], idem.WithOwnerWaits()), j)...)
	}()
	select {
	case <-j.ready:
		return p, nil
	case <-p.done:
		if p.err != nil {
			return nil, p.err
		}
		return p, nil
	}
}

// Pending is a call of [Join] whose outcome depends on the caller's
// commit.
type Pending[T any] struct {
	j    *joined
	done chan struct{}
	pre  T // fn's value, set before ready is closed
	v    T // the call's value, set before done is closed
	err  error
	once sync.Once
}

// Value returns fn's value (or the value replayed), before the commit:
// what Settle returns if the commit succeeds. It returns the same value
// before and after Settle, whatever the commit did.
func (p *Pending[T]) Value() T {
	select {
	case <-p.j.ready:
		return p.pre
	default: // a replay: Join returned once done was closed
	}
	<-p.done
	return p.v
}

// Settle tells the runtime how the caller's commit of tx ended (nil:
// committed) and returns the key's result: fn's value, or the error it
// stored with KeepWork, once the record is known to have committed;
// otherwise an error (commitErr when the commit failed and nothing
// committed, which releases the key: the next call runs fn again). A
// COMMIT whose reply was lost may have committed: the record is read back
// to tell. Settle may be called more than once; later calls return the
// first's answer. For a call that replayed a stored result, commitErr
// changes nothing.
func (p *Pending[T]) Settle(commitErr error) (T, error) {
	p.once.Do(func() { p.j.commit <- commitErr })
	<-p.done
	return p.v, p.err
}

// heldInTx holds the keys whose Join completion waits in a transaction
// for its commit, by runtime, connection and key, with the transaction
// Join was given (the connection may be back in its pool and in another
// transaction before the caller settles).
var heldInTx sync.Map // heldKey → pgx.Tx

// sameTx reports whether a and b are the same transaction value. A type
// that cannot be compared is taken for another transaction.
func sameTx(a, b pgx.Tx) bool {
	ta := reflect.TypeOf(a)
	return ta == reflect.TypeOf(b) && ta.Comparable() && a == b
}

type heldKey struct {
	rt   *idem.Runtime
	conn *pgx.Conn
	key  string
}

// joined is one call of Join.
type joined struct {
	run
	held     heldKey       // its entry in heldInTx while its completion waits
	callerTx pgx.Tx        // the transaction Join was given
	ready    chan struct{} // closed once the completion waits in tx
	commit   chan error    // the caller's commit outcome
}

// Complete implements ownerhook.Completer: the record is completed in
// the caller's transaction, whose commit the caller reports.
func (j *joined) Complete(tok store.Token, rec store.Record, ttl, hold time.Duration) (store.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*hold+5*time.Second)
	defer cancel()
	sp := j.tx
	stored, err := completeIn(ctx, j.st, sp, j.key, j.keptErr, tok, rec, ttl, hold)
	if err != nil {
		return store.Record{}, err
	}
	if err := sp.Commit(ctx); err != nil { // releases the savepoint
		return store.Record{}, fmt.Errorf("pgtx: %q: release the savepoint: %w", j.key, err)
	}
	if reflect.TypeOf(j.callerTx).Comparable() {
		heldInTx.Store(j.held, j.callerTx)
		defer heldInTx.CompareAndDelete(j.held, j.callerTx)
	}
	close(j.ready)
	wait := time.NewTimer(hold)
	defer wait.Stop()
	var commitErr error
	select {
	case commitErr = <-j.commit:
		if commitErr == nil {
			return stored, nil
		}
	case <-wait.C:
		// The caller did not report its commit within hold: the server
		// ends the transaction if it stays idle, and the record tells.
		commitErr = errNotSettled
	}
	return readBack(j.st, j.key, tok, commitErr, hold)
}

// errNotSettled stands for the commit outcome of a caller that did not call
// Settle in time.
var errNotSettled = errors.New("pgtx: the caller did not settle its commit in time")

// readBack learns from the record whether a transaction whose commit
// failed (or was not reported) committed. It has a deadline of its own: a
// COMMIT that failed by running out of time leaves none, and the read must
// outlast what holds the row (the server ends the transaction hold after
// it went idle, if its COMMIT never comes).
func readBack(st *pgstore.Store, key string, tok store.Token, commitErr error, hold time.Duration) (store.Record, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*hold+5*time.Second)
	defer cancel()
	rec, err := st.CompletedBy(ctx, key, tok)
	switch {
	case err == nil:
		return rec, nil
	case errors.Is(err, store.ErrNotFound):
		return store.Record{}, fmt.Errorf("pgtx: %q: the transaction did not commit: %w", key, commitErr)
	default:
		return store.Record{}, fmt.Errorf("pgtx: %q: %w: the commit failed (%v) and reading the record back failed too (%v)",
			key, idem.ErrStoreUnavailable, commitErr, err)
	}
}
