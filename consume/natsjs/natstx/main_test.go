package natstx_test

import (
	"os"
	"testing"

	"github.com/idemrt/idem/internal/pgtest"
)

// shared is the tests' PostgreSQL server; each test has a database of its
// own on it.
var shared *pgtest.Server

func TestMain(m *testing.M) {
	os.Exit(pgtest.Main(m, &shared))
}
