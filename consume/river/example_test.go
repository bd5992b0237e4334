package river_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	idemriver "github.com/idemrt/idem/consume/river"
	"github.com/idemrt/idem/store/pgstore"
)

// ShipArgs asks for an order to be shipped: once per order, however many
// jobs are inserted for it.
type ShipArgs struct {
	Order string `json:"order"`
}

func (ShipArgs) Kind() string { return "ship" }

// IdempotencyKey makes ShipArgs idemriver.Keyed.
func (a ShipArgs) IdempotencyKey() string { return a.Order }

// A worker whose shipment row, idempotency record and the job's completion
// commit in one transaction. The order is inserted twice, as two jobs: it
// ships once, and the second job replays the first's result.
func ExampleNewTxWorker() {
	ctx := context.Background()
	dsn := exampleDatabase() // River's tables, the store's table, "effects"

	riverPool, _ := pgxpool.New(ctx, dsn) // River's connections
	storePool, _ := pgxpool.New(ctx, dsn) // the store's
	workPool, _ := pgxpool.New(ctx, dsn)  // the jobs' transactions
	defer riverPool.Close()
	defer storePool.Close()
	defer workPool.Close()

	st, err := pgstore.New(ctx, storePool, pgstore.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	rt, err := idem.New(idem.Options{Store: st})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx) // after the River client has stopped
	c, err := consume.New(consume.Options{Runtime: rt, Logger: quiet})
	if err != nil {
		log.Fatal(err)
	}
	w, err := idemriver.NewTxWorker(ctx, workPool, idemriver.Options[ShipArgs]{Consumer: c},
		func(ctx context.Context, tx pgx.Tx, job *river.Job[ShipArgs]) error {
			_, err := tx.Exec(ctx, `INSERT INTO effects (key, run) VALUES ($1, 'shipped')`, job.Args.Order)
			return err
		})
	if err != nil {
		log.Fatal(err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	client, err := river.NewClient(riverpgxv5.New(riverPool), &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 4}},
		Workers: workers,
		Logger:  quiet,
	})
	if err != nil {
		log.Fatal(err)
	}
	done, stop := client.Subscribe(river.EventKindJobCompleted)
	defer stop()
	if err := client.Start(ctx); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		if _, err := client.Insert(ctx, ShipArgs{Order: "order-42"}, nil); err != nil {
			log.Fatal(err)
		}
	}
	for range 2 {
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			log.Fatal("the jobs did not complete")
		}
	}
	if err := client.Stop(ctx); err != nil {
		log.Fatal(err)
	}
	var shipped int
	if err := workPool.QueryRow(ctx, `SELECT count(*) FROM effects WHERE key = 'order-42'`).Scan(&shipped); err != nil {
		log.Fatal(err)
	}
	fmt.Println("jobs completed: 2, shipments:", shipped)
	// Output: jobs completed: 2, shipments: 1
}

// exampleDatabase returns a new database on the tests' server, a copy of
// the migrated template, for an example to run against.
func exampleDatabase() string {
	name := fmt.Sprint("example_", seq.Add(1))
	if err := shared.Exec(context.Background(), "postgres", "CREATE DATABASE "+name+" TEMPLATE "+template); err != nil {
		log.Fatal(err)
	}
	return shared.DSN(name)
}

// EmailArgs sends a receipt. Its key comes from Options.Key, not a method.
type EmailArgs struct {
	Receipt string `json:"receipt"`
	To      string `json:"to"`
}

func (EmailArgs) Kind() string { return "email" }

// A worker whose effect is outside the database (an email): it runs
// through idem.Do, so a retry, a rescued job or a duplicate job replays
// the stored result instead of sending again. A worker killed between the
// send and the stored result sends at most twice; pass the key on to the
// provider to close that gap. It needs River's tables, so it is compiled,
// not run.
func ExampleNewWorker() {
	var (
		c    *consume.Consumer // consume.New(consume.Options{Runtime: rt})
		send func(ctx context.Context, to, idempotencyKey string) error
	)
	w, err := idemriver.NewWorker(idemriver.Options[EmailArgs]{
		Consumer: c,
		Key:      func(job *river.Job[EmailArgs]) string { return job.Args.Receipt },
	}, func(ctx context.Context, job *river.Job[EmailArgs]) error {
		if !strings.Contains(job.Args.To, "@") {
			return idem.Permanent(fmt.Errorf("no address in %q", job.Args.To)) // cancels the job
		}
		return send(ctx, job.Args.To, "receipt:"+job.Args.Receipt) // an error: River retries
	})
	if err != nil {
		log.Fatal(err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, w)
	// river.NewClient(riverpgxv5.New(pool), &river.Config{Workers: workers, ...})
}
