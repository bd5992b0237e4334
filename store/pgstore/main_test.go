package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem/internal/pgtest"
	"github.com/idemrt/idem/internal/storesuite"
	"github.com/idemrt/idem/store/pgstore"
)

// The tests share one PostgreSQL server (started here, for the whole test
// binary); each store gets a table of its own, and a test that needs a
// database to itself makes one. Tests that kill, pause or restart a server
// start their own.
var shared *pgtest.Server

func TestMain(m *testing.M) {
	if id := storesuite.WorkerID(); id != "" {
		os.Exit(storesuite.WorkerMain(id, openWorker))
	}
	os.Exit(pgtest.Main(m, &shared))
}

var bg = context.Background()

var tableSeq atomic.Int64

// newTable returns a table name no other test uses.
func newTable() string { return fmt.Sprint("t", tableSeq.Add(1)) }

// newPool returns a pool on dsn, closed when the test ends (after the
// stores on it, which register their cleanup later).
func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(bg, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// sharedPool returns a pool on the shared server's postgres database.
func sharedPool(t testing.TB) *pgxpool.Pool { return newPool(t, shared.DSN("postgres")) }

// newStore returns a migrated store with opts on pool, closed when the
// test ends; with no Table in opts, on a new table.
func newStore(t testing.TB, pool *pgxpool.Pool, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	if opts.Table == "" {
		opts.Table = newTable()
	}
	s, err := pgstore.New(bg, pool, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(bg); err != nil {
		t.Fatal(err)
	}
	return s
}
