package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
)

// Schema and table names are quoted: case, dots, quotes, semicolons and
// letters beyond ASCII are part of the name, never SQL.
func TestOddNames(t *testing.T) {
	t.Parallel()
	pool := sharedPool(t)
	n := fmt.Sprint(" ", tableSeq.Add(1)) // tables of this run only
	cases := []pgstore.Options{
		{Schema: `Bill "ing".v2`, Table: `Idem; DROP TABLE x; --"Recs"` + n},
		{Table: "a.b" + n},
		{Schema: "ключи", Table: "Записи 🔑" + n},
		{Table: strings.Repeat("x", 52-len(n)) + n},
	}
	for i, opts := range cases {
		s := newStore(t, pool, opts)
		tok := claimKey(t, s, "k", "o")
		if _, err := s.Complete(bg, "k", tok, store.Record{Value: []byte("v")}, time.Hour); err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if rec, err := s.Get(bg, "k"); err != nil || string(rec.Value) != "v" {
			t.Fatalf("case %d: Get = %q %v", i, rec.Value, err)
		}
		schema := opts.Schema
		if schema == "" {
			schema = "public"
		}
		var n int
		err := pool.QueryRow(bg, `SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE c.relname = $1 AND n.nspname = $2`, opts.Table, schema).Scan(&n)
		if err != nil || n != 1 {
			t.Fatalf("case %d: table %q in schema %q: found %d (%v)", i, opts.Table, schema, n, err)
		}
	}
}

func claimKey(t testing.TB, s store.Store, key, owner string) store.Token {
	t.Helper()
	res, err := s.Claim(bg, key, store.ClaimRequest{Owner: owner, Lease: time.Hour, TTL: time.Hour})
	if err != nil || res.Status != store.Claimed {
		t.Fatalf("Claim(%q, %q) = %v %v, want claimed", key, owner, res.Status, err)
	}
	return res.Token
}

// Names PostgreSQL cannot hold, or would cut short, are refused by New.
func TestInvalidNames(t *testing.T) {
	t.Parallel()
	pool := sharedPool(t)
	cases := []pgstore.Options{
		{Table: "a\x00b"},
		{Table: "\xff\xfe"},
		{Table: strings.Repeat("x", 53)},
		{Table: "   "},
		{Schema: strings.Repeat("s", 64), Table: "t"},
		{Schema: "s\x00", Table: "t"},
		{Timeout: -time.Second},
		{CleanupInterval: -time.Second},
		{CleanupBatch: -1},
	}
	for _, opts := range cases {
		if _, err := pgstore.New(bg, pool, opts); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("New(%+v) = %v, want ErrInvalidArgument", opts, err)
		}
	}
	if _, err := pgstore.New(bg, nil, pgstore.Options{}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Errorf("New with a nil pool: %v", err)
	}
}

// Migrate is idempotent, and many instances may run it at once.
func TestMigrateConcurrent(t *testing.T) {
	t.Parallel()
	pool := sharedPool(t)
	table := newTable()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			s, err := pgstore.New(bg, newPool(t, shared.DSN("postgres")), pgstore.Options{Table: table, DisableCleanup: true})
			if err == nil {
				err = s.Migrate(bg)
				s.Close()
			}
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	s := newStore(t, pool, pgstore.Options{Table: table})
	if err := s.Migrate(bg); err != nil {
		t.Fatal(err)
	}
	var comment string
	if err := pool.QueryRow(bg, `SELECT obj_description($1::regclass, 'pg_class')`, s.Table()).Scan(&comment); err != nil || comment != "idem pgstore schema 3" {
		t.Fatalf("comment %q %v", comment, err)
	}
}

// A table that pgstore did not create is left alone; a table of a newer
// schema is refused by New and by Migrate.
func TestMigrateRefusesTablesItDoesNotKnow(t *testing.T) {
	t.Parallel()
	pool := sharedPool(t)
	foreign := newTable()
	if _, err := pool.Exec(bg, "CREATE TABLE "+foreign+" (key bytea PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	s, err := pgstore.New(bg, pool, pgstore.Options{Table: foreign})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(bg); err == nil || !strings.Contains(err.Error(), "did not create") {
		t.Fatalf("Migrate of a table pgstore did not create: %v", err)
	}

	newer := newStore(t, pool, pgstore.Options{})
	if _, err := pool.Exec(bg, "COMMENT ON TABLE "+newer.Table()+" IS 'idem pgstore schema 99'"); err != nil {
		t.Fatal(err)
	}
	if err := newer.Migrate(bg); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("Migrate of a newer table: %v", err)
	}
	table := strings.Trim(newer.Table(), `"`)
	if _, err := pgstore.New(bg, pool, pgstore.Options{Table: table}); err == nil || !strings.Contains(err.Error(), "newer") {
		t.Fatalf("New on a newer table: %v", err)
	}
}

// The SQL of SchemaSQL, run by hand, makes a table the store uses as it is
// and Migrate leaves alone.
func TestSchemaSQL(t *testing.T) {
	t.Parallel()
	pool := sharedPool(t)
	opts := pgstore.Options{Schema: fmt.Sprint("own migrations ", tableSeq.Add(1)), Table: "records"}
	sql, err := pgstore.SchemaSQL(opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(bg, sql); err != nil {
		t.Fatalf("%v\n%s", err, sql)
	}
	s := newStore(t, pool, opts) // Migrate included
	tok := claimKey(t, s, "k", "o")
	if err := s.Release(bg, "k", tok); err != nil {
		t.Fatal(err)
	}
	if _, err := pgstore.SchemaSQL(pgstore.Options{Table: "a\x00"}); !errors.Is(err, store.ErrInvalidArgument) {
		t.Fatalf("SchemaSQL of a bad name: %v", err)
	}
}

// Before Migrate, operations fail with the server's error (no table), not
// a panic or a wrong answer.
func TestOperationsBeforeMigrate(t *testing.T) {
	t.Parallel()
	s, err := pgstore.New(bg, sharedPool(t), pgstore.Options{Table: newTable()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	_, err = s.Claim(bg, "k", store.ClaimRequest{Owner: "o", Lease: time.Hour, TTL: time.Hour})
	if err == nil || store.IsContract(err) || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("Claim before Migrate: %v", err)
	}
}

// New fails, within its bound, when the server cannot be reached: a port
// nobody listens on, or a server that accepts connections but never
// answers (paused).
func TestNewUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	host, port, _ := strings.Cut(addr, ":")
	closed := newPool(t, fmt.Sprintf("host=%s port=%s user=postgres sslmode=disable", host, port))
	start := time.Now()
	if _, err := pgstore.New(bg, closed, pgstore.Options{}); err == nil || !strings.Contains(err.Error(), "cannot reach") {
		t.Fatalf("New on a closed port: %v", err)
	}
	t.Logf("closed port: %v", time.Since(start))

	srv := startServer(t, false)
	paused := newPool(t, srv.DSN("postgres"))
	srv.Pause()
	defer srv.Resume()
	start = time.Now()
	if _, err := pgstore.New(bg, paused, pgstore.Options{Timeout: 500 * time.Millisecond}); err == nil {
		t.Fatal("New on a paused server: no error")
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("New on a paused server took %v, with a Timeout of 500ms", d)
	}
	ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel()
	start = time.Now()
	if _, err := pgstore.New(ctx, paused, pgstore.Options{}); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("New on a paused server with a 300ms context: %v after %v", err, time.Since(start))
	}
}

// A pool whose transactions are not READ COMMITTED is refused.
func TestNewRefusesSerializable(t *testing.T) {
	t.Parallel()
	cfg, err := pgxpool.ParseConfig(shared.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["default_transaction_isolation"] = "serializable"
	pool, err := pgxpool.NewWithConfig(bg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if _, err := pgstore.New(bg, pool, pgstore.Options{}); err == nil || !strings.Contains(err.Error(), "read committed") {
		t.Fatalf("New with serializable transactions: %v", err)
	}
}
