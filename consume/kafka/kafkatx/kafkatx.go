// Package kafkatx runs Kafka record handlers whose work is rows in
// PostgreSQL in one transaction with the record's idempotency record: a
// record's rows commit once, or not at all, whatever the crashes,
// rebalances and duplicates.
//
// A handler of package kafka runs through idem.Do: it makes its effect,
// then the runtime stores its result, two writes. A consumer killed
// between them leaves the effect made and the key held by a dead run;
// once its lease ends the partition's next owner takes the key over and
// runs the handler again. Here the handler gets a pgx.Tx, and the
// record's idem record is completed inside that transaction as its last
// statement before COMMIT (package pgtx, pgtx.Do); the offset is
// committed after the COMMIT. A consumer killed
//
//   - before the COMMIT leaves nothing: the server rolls the transaction
//     back; the next owner takes the key over once the dead run's lease
//     has ended and runs the handler again, from the start;
//   - after the COMMIT, before the offset commit, leaves the rows and the
//     record: the next owner replays the record, commits the offset, and
//     the handler does not run.
//
// A permanent error (idem.Permanent) rolls the handler's rows back, stores
// the error and sends the record to the dead-letter topic, if any;
// pgtx.KeepWork commits them with the error instead. The rest is package
// kafka's: keys, retries in place, the retry and dead-letter topics,
// rebalances.
//
// # Requirements
//
//   - The idem runtime's store must be a *pgstore.Store, and the pool the
//     handlers' transactions come from must reach the same database: the
//     record and the rows commit together only there. [New] checks both.
//   - Give the handlers a pool of their own, not the store's: a
//     transaction holds its connection while the handler runs, and would
//     starve the store's lease renewals.
//   - Keep a handler's transaction well within the runtime's lease (see
//     pgtx).
//   - The handler must not commit or roll back the transaction, nor keep
//     it past its return.
package kafkatx

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/kafka"
	"github.com/idemrt/idem/internal/ownerhook"
	"github.com/idemrt/idem/pgtx"
	"github.com/idemrt/idem/store/pgstore"
)

// HandlerFunc handles a record inside tx, a transaction that commits the
// handler's work with the record's idempotency record. An error marked
// idem.Permanent (or one the runtime's classifier calls permanent) gives
// the record up and rolls tx's work back, unless marked pgtx.KeepWork too;
// any other error rolls it back and has the record retried. The handler
// must not commit or roll back tx.
type HandlerFunc func(ctx context.Context, tx pgx.Tx, r *kafka.Record) error

// New returns a kafka.Consumer whose handler h runs in transactions on
// pool, with opts and kopts as kafka.New takes them (opts.Handler and
// opts.Run left nil: this package sets them). It returns an error matching
// idem.ErrInvalidArgument for a nil pool or h, for opts.Handler or opts.Run
// set, for a runtime whose store is not a *pgstore.Store, or for any error
// kafka.New returns; and an error wrapping pgstore.ErrOtherDatabase when
// pool reaches another database than the store's (checked here, with ctx:
// a query or two on pool, and on the store's pool the first time).
func New(ctx context.Context, pool *pgxpool.Pool, h HandlerFunc, opts kafka.Options, kopts ...kgo.Opt) (*kafka.Consumer, error) {
	bad := func(what string) error {
		return fmt.Errorf("kafkatx: %s: %w", what, idem.ErrInvalidArgument)
	}
	switch {
	case pool == nil:
		return nil, bad("the pool is nil")
	case h == nil:
		return nil, bad("the handler is nil")
	case opts.Handler != nil:
		return nil, bad("kafka.Options.Handler is set; kafkatx sets it itself (pass the handler to New)")
	case opts.Run != nil:
		return nil, bad("kafka.Options.Run is set; kafkatx sets it itself (leave it nil)")
	case opts.Consumer == nil || opts.Consumer.Runtime() == nil:
		return nil, bad("kafka.Options.Consumer is nil or not built by consume.New")
	}
	st, ok := ownerhook.StoreOf(opts.Consumer.Runtime()).(*pgstore.Store)
	if !ok {
		return nil, fmt.Errorf("kafkatx: the runtime's store is %T, not a *pgstore.Store: %w",
			ownerhook.StoreOf(opts.Consumer.Runtime()), idem.ErrInvalidArgument)
	}
	if err := st.SameDatabase(ctx, pool); err != nil {
		return nil, fmt.Errorf("kafkatx: the handlers' pool: %w", err)
	}
	opts.Run = runner(pool)
	opts.Handler = wrap(h)
	return kafka.New(opts, kopts...)
}

// txKey is the context key of the transaction the runner hands the
// handler.
type txKey struct{}

// runner returns the Run of a consumer on pool: pgtx.Do, with the
// transaction put in fn's context for wrap's handler to take.
func runner(pool *pgxpool.Pool) consume.Runner[struct{}] {
	return func(ctx context.Context, rt *idem.Runtime, key string,
		fn func(context.Context) (struct{}, error), opts ...idem.CallOption) (struct{}, error) {
		return pgtx.Do(ctx, rt, pool, key, func(ctx context.Context, tx pgx.Tx) (struct{}, error) {
			return fn(context.WithValue(ctx, txKey{}, tx))
		}, opts...)
	}
}

// errNoTx is the error of a handler called without the runner's
// transaction: not reached, since the consumer's Run is always the runner.
var errNoTx = errors.New("kafkatx: the handler was called without its transaction")

func wrap(h HandlerFunc) kafka.HandlerFunc {
	return func(ctx context.Context, r *kafka.Record) error {
		tx, ok := ctx.Value(txKey{}).(pgx.Tx)
		if !ok {
			return errNoTx
		}
		return h(ctx, tx, r)
	}
}
