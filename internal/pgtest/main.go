package pgtest

import (
	"fmt"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// Main runs a package's tests against one PostgreSQL server they share. It
// starts the server, points *shared at it, runs m, stops the server and,
// when every test passed, fails the run if a goroutine leaked. A package's
// TestMain calls os.Exit(pgtest.Main(m, &shared)); tests that kill, pause
// or restart a server start their own with [Start].
func Main(m *testing.M, shared **Server) int {
	srv, err := New(Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	*shared = srv
	code := m.Run()
	srv.Close()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}
