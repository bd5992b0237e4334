package httpidem_test

import (
	"os"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if addr := os.Getenv(serverChildEnv); addr != "" {
		os.Exit(serverChild(addr))
	}
	goleak.VerifyTestMain(m)
}
