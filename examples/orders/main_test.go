package main

import (
	"os"
	"testing"
)

// TestMain sends the consumer processes, which the example starts by
// running its own binary (here, the test binary) again, to consumerMain.
func TestMain(m *testing.M) {
	if id := os.Getenv(envChild); id != "" {
		os.Exit(consumerMain(id))
	}
	os.Exit(m.Run())
}

// The example runs as a test, so CI keeps it working: every order is
// charged exactly once, the killed consumer's too.
func TestExample(t *testing.T) {
	charges, err := run()
	if err != nil {
		t.Fatal(err)
	}
	if len(charges) != numOrders {
		t.Errorf("%d orders counted, want %d", len(charges), numOrders)
	}
	for _, id := range orders() {
		if charges[id] != 1 {
			t.Errorf("order %s charged %d time(s), want 1", id, charges[id])
		}
	}
}
