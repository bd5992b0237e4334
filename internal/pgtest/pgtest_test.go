package pgtest_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/idemrt/idem/internal/pgtest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func query(ctx context.Context, dsn, sql string) (string, error) {
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", err
	}
	defer conn.Close(context.Background())
	var v string
	err = conn.QueryRow(ctx, sql).Scan(&v)
	return v, err
}

// A server is killed, restarted (keeping what it committed), paused and
// resumed; a database of a test's own is empty.
func TestServerLifecycle(t *testing.T) {
	s := pgtest.Start(t, pgtest.Options{Durable: true})
	ctx := context.Background()
	dsn := s.NewDatabase(t)
	if err := s.Exec(ctx, "postgres", "CREATE TABLE kv (k text PRIMARY KEY, v text)"); err != nil {
		t.Fatal(err)
	}
	if err := s.Exec(ctx, "postgres", "INSERT INTO kv VALUES ('k', 'v')"); err != nil {
		t.Fatal(err)
	}
	if n, err := query(ctx, dsn, "SELECT count(*)::text FROM pg_tables WHERE tablename = 'kv'"); err != nil || n != "0" {
		t.Fatalf("a new database sees table kv of another: %q %v", n, err)
	}
	if v, err := query(ctx, s.DSN("postgres"), "SHOW fsync"); err != nil || v != "off" {
		t.Fatalf("fsync = %q %v, want off", v, err)
	}

	// A connection made before the pause gets no answer during it.
	conn, err := pgx.Connect(ctx, s.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	s.Pause()
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = query(short, s.DSN("postgres"), "SELECT 1::text")
	cancel()
	if err == nil {
		t.Fatal("a paused server took a new connection")
	}
	short, cancel = context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = conn.Exec(short, "SELECT 1")
	cancel()
	if err == nil {
		t.Fatal("a paused server answered on a connection made before")
	}
	s.Resume()
	if v, err := query(ctx, s.DSN("postgres"), "SELECT v FROM kv"); err != nil || v != "v" {
		t.Fatalf("after resume: %q %v", v, err)
	}

	s.Kill()
	if _, err := query(ctx, s.DSN("postgres"), "SELECT 1::text"); err == nil {
		t.Fatal("a killed server answered")
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if v, err := query(ctx, s.DSN("postgres"), "SELECT v FROM kv"); err != nil || v != "v" {
		t.Fatalf("after restart: %q %v", v, err)
	}

	// Stopped as pg_ctl stop -m immediate does, it keeps what it
	// committed too.
	if err := s.Exec(ctx, "postgres", "UPDATE kv SET v = 'w'"); err != nil {
		t.Fatal(err)
	}
	s.StopImmediate()
	if _, err := query(ctx, s.DSN("postgres"), "SELECT 1::text"); err == nil {
		t.Fatal("a stopped server answered")
	}
	if !strings.Contains(s.Log(), "immediate shutdown request") {
		t.Fatalf("the server's log tells of no immediate shutdown:\n%s", s.Log())
	}
	if err := s.Restart(); err != nil {
		t.Fatal(err)
	}
	if v, err := query(ctx, s.DSN("postgres"), "SELECT v FROM kv"); err != nil || v != "w" {
		t.Fatalf("after an immediate stop and a start: %q %v", v, err)
	}
}

// Two servers at once keep to their own ports and directories.
func TestTwoServers(t *testing.T) {
	a := pgtest.Start(t, pgtest.Options{})
	b := pgtest.Start(t, pgtest.Options{})
	if a.Port == b.Port {
		t.Fatalf("both on port %d", a.Port)
	}
	ctx := context.Background()
	da, err := query(ctx, a.DSN("postgres"), "SHOW data_directory")
	if err != nil {
		t.Fatal(err)
	}
	db, err := query(ctx, b.DSN("postgres"), "SHOW data_directory")
	if err != nil || da == db {
		t.Fatalf("data directories %q and %q (%v)", da, db, err)
	}
}
