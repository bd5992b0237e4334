package river

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/internal/ownerhook"
	"github.com/idemrt/idem/pgtx"
	"github.com/idemrt/idem/store/pgstore"
)

// TxWorkFunc does a job's work inside tx, a transaction that commits the
// work with the job's idempotency record and River's completion of the
// job. An error marked idem.Permanent (or one the runtime's classifier
// calls permanent) rolls the work back (unless marked pgtx.KeepWork too),
// is stored, and cancels the job; any other error rolls it back and River
// retries the job. The function must not commit or roll back tx, nor keep
// it past its return.
type TxWorkFunc[T river.JobArgs] func(ctx context.Context, tx pgx.Tx, job *river.Job[T]) error

// NewTxWorker returns a worker whose work runs in a transaction on pool
// that also completes the job's idempotency record (pgtx.Join) and the job
// itself (river.JobCompleteTx), and commits the three at once: a worker
// that dies before the COMMIT leaves nothing, one that dies after it
// leaves the job completed.
//
// The River client must use the riverpgxv5 driver, and River's tables, the
// idem store's table and the work's tables must be in one database, the
// one pool reaches. NewTxWorker returns an error matching
// idem.ErrInvalidArgument for a nil pool or work, for what [NewWorker]
// refuses, or for a runtime whose store is not a *pgstore.Store; and one
// wrapping pgstore.ErrOtherDatabase when pool reaches another database
// than the store's (checked here, with ctx). Give the work a pool of its
// own, not the store's: a transaction holds its connection while the work
// runs.
func NewTxWorker[T river.JobArgs](ctx context.Context, pool *pgxpool.Pool, opts Options[T], work TxWorkFunc[T]) (*Worker[T], error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: river.NewTxWorker with a nil pool", idem.ErrInvalidArgument)
	}
	if work == nil {
		return nil, fmt.Errorf("%w: river.NewTxWorker with a nil work function", idem.ErrInvalidArgument)
	}
	w, err := newWorker(opts)
	if err != nil {
		return nil, err
	}
	rt := w.o.Consumer.Runtime()
	st, ok := ownerhook.StoreOf(rt).(*pgstore.Store)
	if !ok {
		return nil, fmt.Errorf("%w: river.NewTxWorker needs a runtime on a *pgstore.Store; this one's store is %T",
			idem.ErrInvalidArgument, ownerhook.StoreOf(rt))
	}
	if err := st.SameDatabase(ctx, pool); err != nil {
		return nil, fmt.Errorf("consume/river: the work's pool: %w", err)
	}
	c := w.o.Consumer
	w.run = func(ctx context.Context, job *river.Job[T], d consume.Delivery) consume.Verdict {
		var failed bool // work returned an error (kept with pgtx.KeepWork, if it reaches the commit)
		_, v := consume.HandleWith(ctx, c, d, txRunner(pool, job, &failed),
			func(ctx context.Context) (struct{}, error) {
				tx, ok := ctx.Value(txKey{}).(pgx.Tx)
				if !ok {
					return struct{}{}, errNoTx
				}
				err := work(ctx, tx, job)
				failed = err != nil
				return struct{}{}, err
			})
		return v
	}
	return w, nil
}

// txKey is the context key of the transaction txRunner hands the work.
type txKey struct{}

// errNoTx is the error of work called without txRunner's transaction: not
// reached, since a tx worker's runner is always txRunner.
var errNoTx = errors.New("consume/river: the work was called without its transaction")

// txRunner returns the consume.Runner of one run of job: it begins a
// transaction on pool, runs fn in it under the key (pgtx.Join, which
// completes the key's record in the transaction), completes the job in it
// (river.JobCompleteTx) unless fn failed, commits, and tells the runtime
// how the commit ended. *failed is set by fn.
func txRunner[T river.JobArgs](pool *pgxpool.Pool, job *river.Job[T], failed *bool) consume.Runner[struct{}] {
	return func(ctx context.Context, rt *idem.Runtime, key string,
		fn func(context.Context) (struct{}, error), opts ...idem.CallOption) (struct{}, error) {
		var zero struct{}
		tx, err := pool.Begin(ctx)
		if err != nil {
			return zero, fmt.Errorf("consume/river: begin the job's transaction: %w", err)
		}
		// The end of the transaction is not cut short by the job's
		// context: the server bounds it (pgtx sets its timeouts), and a
		// COMMIT abandoned half-way would only leave the outcome to be
		// read back.
		end := context.WithoutCancel(ctx)
		p, err := pgtx.Join(ctx, rt, tx, key, func(ctx context.Context, tx pgx.Tx) (struct{}, error) {
			return fn(context.WithValue(ctx, txKey{}, tx))
		}, opts...)
		if err != nil {
			_ = tx.Rollback(end)
			return zero, err
		}
		if !*failed {
			// A result (run now, or replayed): the job completes with it.
			// A permanent error kept with its work commits without the
			// job's completion: the verdict cancels the job.
			if _, err := river.JobCompleteTx[*riverpgxv5.Driver](end, tx, job); err != nil {
				_ = tx.Rollback(end)
				err = fmt.Errorf("consume/river: complete job %d in its transaction: %w", job.ID, err)
				return p.Settle(err)
			}
		}
		return p.Settle(tx.Commit(end))
	}
}
