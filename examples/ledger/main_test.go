package main

import (
	"os"
	"testing"
)

// TestMain sends the steps' processes, which the example starts by running
// its own binary (here, the test binary) again, to childMain.
func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(childMain(role))
	}
	os.Exit(m.Run())
}

// The example runs as a test, so CI keeps it working: every transfer is
// committed, published and applied once, through a kill at each step.
func TestExample(t *testing.T) {
	ok, err := run()
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatal("a transfer was not committed, published and applied exactly once (see the table above)")
	}
}
