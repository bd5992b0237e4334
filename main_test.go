package idem_test

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The baselines' expirable LRU (golang-lru v2.0.7) starts a goroutine
	// that cannot be stopped; that one is not ours.
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction("github.com/hashicorp/golang-lru/v2/expirable.NewLRU[...].func1"))
}
