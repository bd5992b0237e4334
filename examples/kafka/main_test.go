package main

import "testing"

// The example runs as a test, so CI keeps it working: every order ships
// exactly once.
func TestExample(t *testing.T) {
	shipped, err := run()
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range orders() {
		if shipped[id] != 1 {
			t.Errorf("%s shipped %d times, want 1", id, shipped[id])
		}
	}
}
