package main

import "testing"

// The example runs as a test, so CI keeps it working: it exits the test
// binary with a failure (log.Fatal) if what it shows stops being true.
func TestExample(t *testing.T) { main() }
