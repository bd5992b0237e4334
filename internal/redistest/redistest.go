// Package redistest starts real redis-server processes for tests: a single
// node, or a cluster of masters made with redis-cli --cluster create. Every
// server listens on a free loopback port, keeps its files in the test's
// temporary directory, and is killed when the test ends (and, through the
// parent-death signal, if the test binary dies). Servers can be killed
// (SIGKILL), paused (SIGSTOP), resumed (SIGCONT) and restarted on the same
// port, for fault tests.
//
// A missing redis-server is a test failure, never a skip: install Debian's
// redis-server package (the project's test command does it when it can).
package redistest

import (
	"errors"
	"net"
	"os/exec"
	"strconv"
)

// TB is the part of testing.TB the package uses: a *testing.T passes,
// and so does the benchmark harness, which starts a cluster of its own to
// fail over (go run ./bench -failover).
type TB interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Errorf(format string, args ...any)
	Cleanup(func())
	TempDir() string
}

// Binary returns the path of redis-server, or fails the test with a message
// that says how to install it.
func Binary(t TB) string {
	t.Helper()
	p, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redistest: redis-server is not on PATH. Install it (Debian/Ubuntu: " +
			"sudo apt-get install -y redis-server) or run `make test`, which installs it when it can.")
	}
	return p
}

// startOnFreePort starts bin on a free port (whose bus port is free too,
// with bus) and registers its cleanup. It tries five ports: a free port can
// be taken between the check and the start.
func startOnFreePort(t TB, bin string, bus bool, opts Options) (*Server, error) {
	t.Helper()
	var lastErr error
	for range 5 {
		port, err := freePort(bus)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s := newServer(t, bin, port, opts)
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.cleanup)
			return s, nil
		}
	}
	return nil, lastErr
}

// freePort returns a loopback port that is free now; with bus set, port
// +10000 is free too (a cluster node's bus port).
func freePort(bus bool) (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !bus {
			l.Close()
			return port, nil
		}
		if port+10000 > 65535 {
			l.Close()
			continue
		}
		l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		l.Close()
		if err != nil {
			continue
		}
		l2.Close()
		return port, nil
	}
	return 0, errors.New("no free loopback port found")
}
