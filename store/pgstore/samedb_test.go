package pgstore_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem/store/pgstore"
)

// Where no role may read the system identifier, a database is known by
// its server's start time: a server restarted since the store first looked
// is still the store's (the store looks again before refusing), and
// another server is not.
func TestSameDatabaseWithoutTheSystemIdentifier(t *testing.T) {
	t.Parallel()
	srv := startServer(t, false)
	other := startServer(t, false)
	for _, s := range []string{srv.DSN("postgres"), other.DSN("postgres")} {
		p := newPool(t, s)
		if _, err := p.Exec(bg, `CREATE ROLE app LOGIN; GRANT CREATE ON SCHEMA public TO app;
			REVOKE EXECUTE ON FUNCTION pg_control_system() FROM PUBLIC`); err != nil {
			t.Fatal(err)
		}
		p.Close()
	}
	asApp := func(dsn string) *pgxpool.Pool {
		cfg, err := pgxpool.ParseConfig(dsn)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ConnConfig.User = "app"
		p, err := pgxpool.NewWithConfig(bg, cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Close)
		return p
	}
	s := newStore(t, asApp(srv.DSN("postgres")), pgstore.Options{})
	if err := s.SameDatabase(bg, asApp(srv.DSN("postgres"))); err != nil {
		t.Fatal(err)
	}
	if err := s.SameDatabase(bg, asApp(other.DSN("postgres"))); !errors.Is(err, pgstore.ErrOtherDatabase) {
		t.Fatalf("another server: %v, want ErrOtherDatabase", err)
	}
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	after := asApp(srv.DSN("postgres"))
	var err error
	for range 10 { // the store's pool meets its connections from before the restart first
		if err = s.SameDatabase(bg, after); err == nil || errors.Is(err, pgstore.ErrOtherDatabase) {
			break
		}
	}
	if err != nil {
		t.Fatalf("after a restart: %v", err)
	}
}
