package natstx_test

import (
	"context"
	"encoding/json"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
	"github.com/idemrt/idem/consume/natsjs/natstx"
	"github.com/idemrt/idem/store/pgstore"
)

// A consumer that credits accounts: each message's UPDATE commits with
// the message's idempotency record, so a redelivery (after a crash between
// the COMMIT and the acknowledgement, say) replays instead of crediting
// again. It needs a PostgreSQL server and a JetStream consumer, so it is
// compiled, not run; examples/ledger runs the whole of it.
func ExampleForConsumer() {
	ctx := context.Background()
	dsn := "postgres://localhost/bank"
	var cons jetstream.Consumer // a durable consumer with AckExplicitPolicy

	storePool, err := pgxpool.New(ctx, dsn) // the store's connections
	if err != nil {
		log.Fatal(err)
	}
	workPool, err := pgxpool.New(ctx, dsn) // the handlers' transactions
	if err != nil {
		log.Fatal(err)
	}
	st, err := pgstore.New(ctx, storePool, pgstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	rt, err := idem.New(idem.Options{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	c, err := consume.New(consume.Options{Runtime: rt})
	if err != nil {
		log.Fatal(err)
	}
	a, err := natstx.ForConsumer(ctx, cons, workPool, natsjs.Options{Consumer: c})
	if err != nil {
		log.Fatal(err)
	}
	cc, err := cons.Consume(a.Handler(ctx, func(ctx context.Context, tx pgx.Tx, m *natsjs.Message) error {
		var credit struct {
			Account string `json:"account"`
			Cents   int64  `json:"cents"`
		}
		if err := json.Unmarshal(m.Data(), &credit); err != nil {
			return idem.Permanent(err) // a malformed message: terminated, never retried
		}
		_, err := tx.Exec(ctx, `UPDATE balances SET cents = cents + $1 WHERE account = $2`, credit.Cents, credit.Account)
		return err
	}))
	if err != nil {
		log.Fatal(err)
	}
	defer cc.Stop()
}
