package natstx

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
	"github.com/idemrt/idem/internal/ownerhook"
	"github.com/idemrt/idem/pgtx"
	"github.com/idemrt/idem/store/pgstore"
)

// HandlerFunc handles a message inside tx, a transaction that commits the
// handler's work with the message's idempotency record. An error marked
// idem.Permanent (or one the runtime's classifier calls permanent)
// terminates the message and rolls tx's work back, unless marked
// pgtx.KeepWork too; any other error rolls it back and has the message
// redelivered. The handler must not commit or roll back tx.
type HandlerFunc func(ctx context.Context, tx pgx.Tx, m *natsjs.Message) error

// Adapter runs JetStream message handlers once per message key, each in a
// transaction that commits with the message's record. It holds no
// goroutines and is safe for concurrent use.
type Adapter struct {
	a *natsjs.Adapter
}

// New returns an adapter whose handlers run in transactions on pool, with
// opts as natsjs.New takes them. It returns an error matching
// idem.ErrInvalidArgument for a nil pool, for opts.Run set (the adapter
// sets it), for a runtime whose store is not a *pgstore.Store, or for any
// error natsjs.New returns; and an error wrapping pgstore.ErrOtherDatabase
// when pool reaches another database than the store's (checked here, with
// ctx: a query or two on pool, and on the store's pool the first time).
func New(ctx context.Context, pool *pgxpool.Pool, opts natsjs.Options) (*Adapter, error) {
	if err := prepare(pool, &opts); err != nil {
		return nil, err
	}
	a, err := natsjs.New(opts)
	if err != nil {
		return nil, err
	}
	return finish(ctx, a, pool, opts.Consumer)
}

// ForConsumer is [New] for the messages of c, as natsjs.ForConsumer:
// c must acknowledge explicitly, and its AckWait is read from its cached
// info when opts leaves it zero.
func ForConsumer(ctx context.Context, c jetstream.Consumer, pool *pgxpool.Pool, opts natsjs.Options) (*Adapter, error) {
	if err := prepare(pool, &opts); err != nil {
		return nil, err
	}
	a, err := natsjs.ForConsumer(c, opts)
	if err != nil {
		return nil, err
	}
	return finish(ctx, a, pool, opts.Consumer)
}

// prepare checks pool and sets opts.Run to run calls in its transactions.
func prepare(pool *pgxpool.Pool, opts *natsjs.Options) error {
	if pool == nil {
		return fmt.Errorf("%w: natstx with a nil pool", idem.ErrInvalidArgument)
	}
	if opts.Run != nil {
		return fmt.Errorf("%w: natstx: natsjs.Options.Run is set; natstx sets it itself (leave it nil)", idem.ErrInvalidArgument)
	}
	opts.Run = runner(pool)
	return nil
}

// finish checks that the runtime's store is a pgstore.Store on pool's
// database.
func finish(ctx context.Context, a *natsjs.Adapter, pool *pgxpool.Pool, c *consume.Consumer) (*Adapter, error) {
	st, ok := ownerhook.StoreOf(c.Runtime()).(*pgstore.Store)
	if !ok {
		return nil, fmt.Errorf("%w: natstx needs a runtime on a *pgstore.Store; this one's store is %T",
			idem.ErrInvalidArgument, ownerhook.StoreOf(c.Runtime()))
	}
	if err := st.SameDatabase(ctx, pool); err != nil {
		return nil, fmt.Errorf("natstx: the handlers' pool: %w", err)
	}
	return &Adapter{a: a}, nil
}

// txKey is the context key of the transaction the runner hands the
// handler.
type txKey struct{}

// runner returns the natsjs.Options.Run of an adapter on pool: pgtx.Do,
// with the transaction put in fn's context for [wrap]'s handler to take.
func runner(pool *pgxpool.Pool) consume.Runner[struct{}] {
	return func(ctx context.Context, rt *idem.Runtime, key string,
		fn func(context.Context) (struct{}, error), opts ...idem.CallOption) (struct{}, error) {
		return pgtx.Do(ctx, rt, pool, key, func(ctx context.Context, tx pgx.Tx) (struct{}, error) {
			return fn(context.WithValue(ctx, txKey{}, tx))
		}, opts...)
	}
}

// errNoTx is the error of a handler called without the runner's
// transaction: not reached, since the adapter's Run is always the runner.
var errNoTx = errors.New("natstx: the handler was called without its transaction")

// wrap turns h into the natsjs handler the runner calls (nil stays nil:
// natsjs retries a message given no handler).
func wrap(h HandlerFunc) natsjs.HandlerFunc {
	if h == nil {
		return nil
	}
	return func(ctx context.Context, m *natsjs.Message) error {
		tx, ok := ctx.Value(txKey{}).(pgx.Tx)
		if !ok {
			return errNoTx
		}
		return h(ctx, tx, m)
	}
}

// Handler returns a jetstream.MessageHandler, for Consumer.Consume, that
// processes each message with h in its transaction; see
// natsjs.Adapter.Handler for ctx and shutting down.
func (a *Adapter) Handler(ctx context.Context, h HandlerFunc) jetstream.MessageHandler {
	return func(msg jetstream.Msg) { _, _ = a.Process(ctx, msg, h) }
}

// Process handles one message with h in its transaction and answers the
// server, as natsjs.Adapter.Process does: use it in a Messages().Next() or
// Fetch loop. A nil or zero Adapter answers nothing and returns an error
// matching idem.ErrInvalidArgument.
func (a *Adapter) Process(ctx context.Context, msg jetstream.Msg, h HandlerFunc) (consume.Verdict, error) {
	if a == nil || a.a == nil {
		err := fmt.Errorf("%w: natstx: Process on an adapter nil or not built by New", idem.ErrInvalidArgument)
		return consume.Verdict{Err: err}, err
	}
	return a.a.Process(ctx, msg, wrap(h))
}
