package river_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
	"github.com/riverqueue/river/rivertype"
	"go.uber.org/goleak"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/pgtest"
	"github.com/idemrt/idem/store/pgstore"
)

// The tests share one PostgreSQL server; each test gets a database of its
// own, with River's tables, the idem store's table and an effects table
// the work writes to (no unique constraint: only idem keeps a key from
// applying twice).
var shared *pgtest.Server

// template is the database every test's database is a copy of: River's
// migrations and the store's table are applied once.
const template = "river_template"

func TestMain(m *testing.M) {
	if role := os.Getenv(envChild); role != "" {
		os.Exit(childMain(role))
	}
	srv, err := pgtest.New(pgtest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared = srv
	if err := srv.Exec(context.Background(), "postgres", "CREATE DATABASE "+template); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if err := prepare(context.Background(), srv.DSN(template)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	srv.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// ChargeArgs is the tests' job: charge an order once, whatever the jobs
// inserted for it.
type ChargeArgs struct {
	Order string `json:"order"`
	// Note differs between jobs of one order (so River's unique jobs
	// would not even see them as duplicates).
	Note string `json:"note,omitempty"`
}

func (ChargeArgs) Kind() string { return "charge" }

// IdempotencyKey makes ChargeArgs river.Keyed: one charge per order.
func (a ChargeArgs) IdempotencyKey() string { return a.Order }

var seq atomic.Int64

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), idemtest.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// prepare makes dsn's database ready: River's migrations, the store's
// table, the effects table.
func prepare(ctx context.Context, dsn string) error {
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	mig, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	if _, err := mig.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("river migrations: %w", err)
	}
	st, err := pgstore.New(ctx, pool, pgstore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	if err := st.Migrate(ctx); err != nil {
		return err
	}
	_, err = pool.Exec(ctx, `CREATE TABLE effects (id bigserial PRIMARY KEY, key text NOT NULL, run text NOT NULL)`)
	return err
}

// env is a test's database, with a pool for River, one for the store and
// one for the work.
type env struct {
	dsn   string
	river *pgxpool.Pool
	work  *pgxpool.Pool
	store *pgstore.Store
	rt    *idem.Runtime
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx := testCtx(t)
	name := fmt.Sprint("test_", seq.Add(1))
	if err := shared.Exec(ctx, "postgres", "CREATE DATABASE "+name+" TEMPLATE "+template); err != nil {
		t.Fatal(err)
	}
	e := &env{dsn: shared.DSN(name)}
	e.river, e.work = newPool(t, e.dsn), newPool(t, e.dsn)
	var err error
	e.store, err = pgstore.New(ctx, newPool(t, e.dsn), pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.store.Close() })
	e.rt = idemtest.Runtime(t, idem.Options{Store: e.store, Policy: idem.Policy{Lease: time.Second}})
	return e
}

func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// quiet is a logger for the tests: River and the consumer log every retry
// and cancel.
var quiet = slog.New(slog.DiscardHandler)

// consumer returns a consume.Consumer on rt for the tests: short delays,
// a short settle.
func consumer(t testing.TB, rt *idem.Runtime) *consume.Consumer {
	t.Helper()
	c, err := consume.New(consume.Options{Runtime: rt, Policy: idem.Policy{Settle: 300 * time.Millisecond},
		MinDelay: 50 * time.Millisecond, MaxDelay: time.Second, Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// soon retries a failed job at once: River makes a job retried in the
// past available again without waiting for its scheduler.
type soon struct{}

func (soon) NextRetry(*rivertype.JobRow) time.Time { return time.Now().Add(-time.Second) }

// config is the River configuration of the tests' workers.
func config(workers *river.Workers) *river.Config {
	return &river.Config{
		Queues:            map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: 8}},
		Workers:           workers,
		FetchCooldown:     10 * time.Millisecond,
		FetchPollInterval: 50 * time.Millisecond,
		RetryPolicy:       soon{},
		Logger:            quiet,
		TestOnly:          true,
	}
}

// start starts a River client on pool with cfg, stopped at the end of the
// test.
func start(t testing.TB, pool *pgxpool.Pool, cfg *river.Config) *river.Client[pgx.Tx] {
	t.Helper()
	c, err := river.NewClient(riverpgxv5.New(pool), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(testCtx(t)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Stop(ctx); err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("stop the River client: %v", err)
		}
	})
	return c
}

// inserter returns an insert-only River client on e's database.
func (e *env) inserter(t testing.TB) *river.Client[pgx.Tx] {
	t.Helper()
	c, err := river.NewClient(riverpgxv5.New(e.river), &river.Config{Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// insert inserts a job with args and returns its id.
func insert(t testing.TB, c *river.Client[pgx.Tx], args river.JobArgs) int64 {
	t.Helper()
	res, err := c.Insert(testCtx(t), args, &river.InsertOpts{MaxAttempts: 5})
	if err != nil {
		t.Fatal(err)
	}
	return res.Job.ID
}

// state waits until job id is in want, and returns the job.
func (e *env) state(t testing.TB, c *river.Client[pgx.Tx], id int64, want rivertype.JobState) *rivertype.JobRow {
	t.Helper()
	var job *rivertype.JobRow
	idemtest.Eventually(t, fmt.Sprintf("job %d %s", id, want), func() bool {
		var err error
		job, err = c.JobGet(testCtx(t), id)
		return err == nil && job.State == want
	})
	return job
}

// effects returns the effects key made.
func (e *env) effects(t testing.TB, key string) int {
	t.Helper()
	var n int
	if err := e.work.QueryRow(testCtx(t), `SELECT count(*) FROM effects WHERE key = $1`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// dbExec is what a work function writes its effect with: the work pool
// (plain) or the job's transaction (transactional).
type dbExec = interface {
	Exec(context.Context, string, ...any) (pgconn.CommandTag, error)
}

// effect writes an effect of key by run, on db (a pool: at once; a
// transaction: with it).
func effect(ctx context.Context, db dbExec, key, run string) error {
	_, err := db.Exec(ctx, `INSERT INTO effects (key, run) VALUES ($1, $2)`, key, run)
	return err
}

func order() string { return fmt.Sprint("order-", seq.Add(1)) }
