package natstest

import (
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// Broker is a NATS server with JetStream for a test: one in the test
// process ([Server], from [Start]) or a nats-server process ([Process],
// from [StartProcess]). Tests that must hold on every supported server run
// once for each [Kind].
type Broker interface {
	// ClientURL returns the server's client URL, the same across
	// restarts.
	ClientURL() string
	// ServerVersion returns the server's version ("2.9.10").
	ServerVersion() string
	// Restart stops the server and starts it again on the same port and
	// store: a [Server] shuts down cleanly, a [Process] is killed with
	// SIGKILL.
	Restart()
	// Connect returns a client connection that reconnects without
	// limit, closed at the end of the test.
	Connect(t testing.TB, opts ...nats.Option) *nats.Conn
}

// Kind names a way of running a [Broker].
type Kind string

// The kinds of broker.
const (
	// Embedded is the server of the module's nats-server dependency,
	// in the test process.
	Embedded Kind = "embedded"
	// Installed is the nats-server binary on PATH, in a process of its
	// own (Debian 12's package: 2.9.10).
	Installed Kind = "installed"
)

// Kinds lists every kind of broker, for tests that run on each.
var Kinds = []Kind{Embedded, Installed}

// StartKind starts a broker of kind k; an unknown kind fails the test.
func StartKind(t testing.TB, k Kind) Broker {
	t.Helper()
	switch k {
	case Embedded:
		return Start(t)
	case Installed:
		return StartProcess(t)
	}
	t.Fatalf("natstest: unknown broker kind %q", k)
	return nil
}

// connect connects to url, reconnecting without limit, until the end of
// the test.
func connect(t testing.TB, url string, opts []nats.Option) *nats.Conn {
	t.Helper()
	opts = append([]nats.Option{
		nats.MaxReconnects(-1),
		nats.ReconnectWait(50 * time.Millisecond),
		nats.RetryOnFailedConnect(false),
	}, opts...)
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("natstest: connect to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	return nc
}
