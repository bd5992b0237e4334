package flows_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves a goroutine behind; in the crash
// test's worker process it runs the worker instead (see runWorker).
func TestMain(m *testing.M) {
	if runWorker() {
		return
	}
	goleak.VerifyTestMain(m)
}
