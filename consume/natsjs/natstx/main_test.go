package natstx_test

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"

	"github.com/idemrt/idem/internal/pgtest"
)

// shared is the tests' PostgreSQL server; each test has a database of its
// own on it.
var shared *pgtest.Server

func TestMain(m *testing.M) {
	srv, err := pgtest.New(pgtest.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared = srv
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
