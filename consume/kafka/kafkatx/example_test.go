package kafkatx_test

import (
	"context"
	"encoding/json"
	"log"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/kafka"
	"github.com/idemrt/idem/consume/kafka/kafkatx"
	"github.com/idemrt/idem/store/pgstore"
)

// A member that credits accounts: each record's UPDATE commits with the
// record's idempotency record, so a record fetched again (after a crash
// between the COMMIT and the offset commit, say) replays instead of
// crediting again. It needs a PostgreSQL server and a Kafka cluster, so
// it is compiled, not run.
func ExampleNew() {
	ctx := context.Background()
	dsn := "postgres://localhost/bank"

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
	cc, err := consume.New(consume.Options{Runtime: rt})
	if err != nil {
		log.Fatal(err)
	}
	c, err := kafkatx.New(ctx, workPool, func(ctx context.Context, tx pgx.Tx, r *kafka.Record) error {
		var credit struct {
			Account string `json:"account"`
			Cents   int64  `json:"cents"`
		}
		if err := json.Unmarshal(r.Value, &credit); err != nil {
			return idem.Permanent(err) // a malformed record: to the dead-letter topic
		}
		_, err := tx.Exec(ctx, `UPDATE balances SET cents = cents + $1 WHERE account = $2`, credit.Cents, credit.Account)
		return err
	}, kafka.Options{Consumer: cc, Group: "ledger", Topics: []string{"credits"}, DeadLetterTopic: "credits-dlt"},
		kgo.SeedBrokers("localhost:9092"))
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	if err := c.Run(ctx); err != nil {
		log.Fatal(err)
	}
}
