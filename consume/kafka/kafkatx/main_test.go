package kafkatx_test

import (
	"os"
	"testing"

	"github.com/idemrt/idem/internal/pgtest"
)

// shared is the tests' PostgreSQL server; each test has a database of its
// own on it.
var shared *pgtest.Server

// TestMain sends the child processes of the crash test to childMain; the
// rest is the tests, on the shared server.
func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(childMain())
	}
	os.Exit(pgtest.Main(m, &shared))
}
