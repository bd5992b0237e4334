package kafka_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

// TestMain sends the child consumer processes of the crash tests to
// childMain; the rest is the tests.
func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(childMain())
	}
	goleak.VerifyTestMain(m)
}
