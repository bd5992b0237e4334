package pgtx_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/pgtx"
	"github.com/idemrt/idem/store/pgstore"
)

// poolWith returns a pool on dsn whose connections run with edit's changes
// to their configuration.
func poolWith(t testing.TB, dsn string, edit func(*pgx.ConnConfig)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	edit(cfg.ConnConfig)
	p, err := pgxpool.NewWithConfig(bg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// A work pool whose search_path finds another table of the store's name
// first (another store's, in schema "other"): the completion still writes
// the store's own table. It used to write the other one, update nothing
// there, and answer ErrLeaseLost, every time.
func TestWorkPoolWithAnotherSearchPath(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	if _, err := e.work.Exec(bg, `CREATE SCHEMA other`); err != nil {
		t.Fatal(err)
	}
	st2, err := pgstore.New(bg, newPool(t, e.dsn), pgstore.Options{Schema: "other"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st2.Close() })
	if err := st2.Migrate(bg); err != nil {
		t.Fatal(err)
	}
	work := poolWith(t, e.dsn, func(c *pgx.ConnConfig) { c.RuntimeParams["search_path"] = "other, public" })
	rt := e.runtime(t, idem.Options{})
	id, err := pgtx.Do(bg, rt, work, "k", charge("k", runID()))
	if err != nil {
		t.Fatalf("pgtx.Do with a work pool on another search_path: %v", err)
	}
	got, err := idem.Do(bg, e.runtime(t, idem.Options{}), "k", notRun[int64](t))
	if err != nil || got != id {
		t.Fatalf("other instance = %d, %v, want %d", got, err, id)
	}
	var n int
	if err := e.work.QueryRow(bg, `SELECT count(*) FROM other.idem`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("other.idem has %d rows (%v), want 0", n, err)
	}
}

// A work pool as a role that may not call pg_control_system(), on the
// store's database: the same database. The check used to fail with
// "permission denied" whatever the CASE around the call said.
func TestWorkPoolAsARoleWithoutTheSystemIdentifier(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	// Roles are the server's: another run of the test may have made it.
	if _, err := e.work.Exec(bg, `DO $$ BEGIN
		IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'pgtx_app') THEN CREATE ROLE pgtx_app LOGIN; END IF;
		END $$`); err != nil {
		t.Fatal(err)
	}
	if _, err := e.work.Exec(bg, `GRANT ALL ON charges, charges_id_seq, idem TO pgtx_app;
		REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC`); err != nil {
		t.Fatal(err)
	}
	work := poolWith(t, e.dsn, func(c *pgx.ConnConfig) { c.User = "pgtx_app" })
	rt := e.runtime(t, idem.Options{})
	if _, err := pgtx.Do(bg, rt, work, "k", charge("k", runID())); err != nil {
		t.Fatalf("pgtx.Do as a role without pg_control_system(): %v", err)
	}
	e.wantRows(t, "k", 1)
}

// A caller's transaction at REPEATABLE READ that read before Join: its
// snapshot predates the claim, so the completion statement cannot see the
// key's row. Join used to answer ErrLeaseLost and leave the key held by a
// claim nobody ran, for a lease; it is refused as an invalid argument, and
// the key released at once.
func TestJoinRefusesRepeatableRead(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	rt := e.runtime(t, idem.Options{})
	tx, err := e.work.BeginTx(bg, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(bg)
	if _, err := tx.Exec(bg, `INSERT INTO charges (key, run, amount) VALUES ('audit', 'caller', 0)`); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = pgtx.Join(bg, rt, tx, "k", charge("k", runID()), idem.WithLease(5*time.Second))
	if !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("Join at REPEATABLE READ = %v, want ErrInvalidArgument", err)
	}
	v, err := idem.Do(bg, rt, "k", func(context.Context) (int64, error) { return 7, nil }, idem.WithSettle(10*time.Second))
	if err != nil || v != 7 {
		t.Fatalf("next call = %d, %v", v, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("the next call of the key waited %v: the key was not released", d)
	}
	if err := tx.Commit(bg); err != nil {
		t.Fatal(err)
	}
	e.wantRows(t, "k", 0)
	e.wantRows(t, "audit", 1)
}
