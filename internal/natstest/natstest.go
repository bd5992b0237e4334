// Package natstest starts NATS servers with JetStream for the tests of the
// NATS adapters, on a free loopback port and a store directory of the
// test's own: inside the test process ([Start]), or as a process of the
// nats-server binary on PATH ([StartProcess]), so that the adapters are
// tested on the server the machine's package provides too. It never
// connects to a server already running on the machine. A server can be
// stopped and started again on the same port and store directory (a
// restart; the process with SIGKILL), and is stopped at the end of the
// test.
package natstest

import (
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Timeout bounds a server's start and shutdown.
const Timeout = 20 * time.Second

// Server is a NATS server with JetStream running in the test process.
type Server struct {
	t    testing.TB
	mu   sync.Mutex
	srv  *server.Server
	opts server.Options
	// URL is the server's client URL, the same across restarts.
	URL string
}

// Start starts a server with JetStream on a random loopback port, with its
// store in a directory of the test's own; the test's cleanup shuts it down.
func Start(t testing.TB) *Server {
	t.Helper()
	s := &Server{t: t, opts: server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  t.TempDir(),
		NoLog:     true,
		NoSigs:    true,
		// No cluster, leaf, gateway or HTTP monitoring listeners.
		HTTPPort: 0,
	}}
	if err := s.start(Timeout); err != nil {
		t.Fatal(err)
	}
	addr := s.srv.Addr().String()
	var port int
	if _, err := fmt.Sscanf(addr[len("127.0.0.1:"):], "%d", &port); err != nil {
		t.Fatalf("natstest: server address %q: %v", addr, err)
	}
	s.opts.Port = port // restarts take the same port
	s.URL = "nats://" + addr
	t.Cleanup(s.Shutdown)
	return s
}

// start starts a server with s.opts, waiting up to ready for it to take
// connections.
func (s *Server) start(ready time.Duration) error {
	opts := s.opts
	srv, err := server.NewServer(&opts)
	if err != nil {
		return fmt.Errorf("natstest: new server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(ready) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("natstest: the server was not ready within %v", ready)
	}
	if !srv.JetStreamEnabled() {
		srv.Shutdown()
		srv.WaitForShutdown()
		return fmt.Errorf("natstest: JetStream is not enabled")
	}
	s.mu.Lock()
	s.srv = srv
	s.mu.Unlock()
	return nil
}

// Shutdown stops the server and waits until it has stopped. Calling it on
// a stopped server does nothing.
func (s *Server) Shutdown() {
	s.mu.Lock()
	srv := s.srv
	s.srv = nil
	s.mu.Unlock()
	if srv != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
	}
}

// attemptReady bounds one attempt of a restart: a server that cannot listen
// (its port not free yet) never gets ready, so an attempt that waited the
// whole Timeout would leave no time for another.
const attemptReady = 2 * time.Second

// Restart shuts the server down, if it runs, and starts it again on the
// same port with the same store directory: streams, consumers and their
// acknowledged state survive. While the port is not free yet (a socket
// lingering, or another process holding it for a while) it tries again,
// each attempt short, until Timeout has passed.
//
// A client's request in flight across the restart (sent while it
// reconnects) may never be answered: give requests that may cross a
// restart a short timeout of their own, and retry.
func (s *Server) Restart() {
	s.t.Helper()
	s.Shutdown()
	addr := net.JoinHostPort(s.opts.Host, strconv.Itoa(s.opts.Port))
	deadline := time.Now().Add(Timeout)
	for {
		err := portFree(addr)
		if err == nil {
			err = s.start(attemptReady)
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("natstest: restart: %v", err)
		}
		s.t.Logf("natstest: restart: %v; trying again", err)
		time.Sleep(50 * time.Millisecond)
	}
}

// portFree reports whether addr can be listened on now.
func portFree(addr string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("natstest: port not free: %w", err)
	}
	return l.Close()
}

// Connect returns a client connection to the server that reconnects
// without limit (across restarts), closed at the end of the test.
func (s *Server) Connect(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	return connect(t, s.URL, opts)
}

// ClientURL returns the server's client URL.
func (s *Server) ClientURL() string { return s.URL }

// ServerVersion returns the embedded server's version.
func (s *Server) ServerVersion() string { return server.VERSION }
