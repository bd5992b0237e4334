package pgtx_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/pgtest"
	"github.com/idemrt/idem/store/pgstore"
)

// The tests share one PostgreSQL server; each test gets a database of its
// own. Tests that kill, pause or restart the server start their own.
var shared *pgtest.Server

func TestMain(m *testing.M) {
	if name := os.Getenv(childEnv); name != "" {
		os.Exit(childMain(name))
	}
	os.Exit(pgtest.Main(m, &shared))
}

var bg = context.Background()

var seq atomic.Int64

func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(bg, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// env is a test's database: the store's pool and store, a pool for the
// work, and a charges table the functions write to.
type env struct {
	dsn   string
	store *pgstore.Store
	work  *pgxpool.Pool
}

func newEnv(t testing.TB, srv *pgtest.Server) *env {
	t.Helper()
	dsn := srv.NewDatabase(t)
	e := &env{dsn: dsn, work: newPool(t, dsn)}
	e.store = newStore(t, newPool(t, dsn))
	if _, err := e.work.Exec(bg, `CREATE TABLE charges (id bigserial PRIMARY KEY, key text NOT NULL, run text NOT NULL, amount int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return e
}

func newStore(t testing.TB, pool *pgxpool.Pool) *pgstore.Store {
	t.Helper()
	st, err := pgstore.New(bg, pool, pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Migrate(bg); err != nil {
		t.Fatal(err)
	}
	return st
}

func (e *env) runtime(t testing.TB, opts idem.Options) *idem.Runtime {
	opts.Store = e.store
	return idemtest.Runtime(t, opts)
}

// rows returns how many charges key has.
func (e *env) rows(t testing.TB, key string) int {
	t.Helper()
	var n int
	if err := e.work.QueryRow(bg, `SELECT count(*) FROM charges WHERE key = $1`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// wantRows fails the test unless the charges table holds want rows for
// key.
func (e *env) wantRows(t testing.TB, key string, want int) {
	t.Helper()
	if n := e.rows(t, key); n != want {
		t.Fatalf("%d charges rows for key %q, want %d", n, key, want)
	}
}

func runID() string { return fmt.Sprint("run-", seq.Add(1), "-", time.Now().UnixNano()) }

// exampleDatabase returns a new database on the tests' server, with the
// tables the examples use, for an example to run against.
func exampleDatabase() string {
	ctx := context.Background()
	name := fmt.Sprint("example_", seq.Add(1))
	if err := shared.Exec(ctx, "postgres", "CREATE DATABASE "+name); err != nil {
		panic(err)
	}
	if err := shared.Exec(ctx, name, `CREATE TABLE charges (id bigserial PRIMARY KEY, key text NOT NULL, run text NOT NULL, amount int NOT NULL);
		CREATE TABLE accounts (id text PRIMARY KEY, cents bigint NOT NULL);
		INSERT INTO accounts VALUES ('alice', 10000), ('bob', 0)`); err != nil {
		panic(err)
	}
	return shared.DSN(name)
}

// rowsErr returns how many charges key has, or the query's error.
func (e *env) rowsErr(key string) (int, error) {
	var n int
	err := e.work.QueryRow(bg, `SELECT count(*) FROM charges WHERE key = $1`, key).Scan(&n)
	return n, err
}
