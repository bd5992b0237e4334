package natstest_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"go.uber.org/goleak"

	"github.com/idemrt/idem/internal/natstest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// A restart, clean (embedded) or a SIGKILL (installed), keeps the port and
// the stream's acknowledged messages.
func TestRestartKeepsStreams(t *testing.T) {
	for _, k := range natstest.Kinds {
		t.Run(string(k), func(t *testing.T) { testRestartKeepsStreams(t, natstest.StartKind(t, k)) })
	}
}

func testRestartKeepsStreams(t *testing.T, srv natstest.Broker) {
	if srv.ServerVersion() == "" {
		t.Fatal("no server version")
	}
	t.Logf("server %s", srv.ServerVersion())
	nc := srv.Connect(t)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), natstest.Timeout)
	defer cancel()
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(ctx, "s.1", []byte("x")); err != nil {
		t.Fatal(err)
	}
	url := srv.ClientURL()
	srv.Restart()
	if srv.ClientURL() != url {
		t.Fatalf("URL %s after restart, was %s", srv.ClientURL(), url)
	}
	// A request sent while the client reconnects can go unanswered: each
	// try gets a second of its own.
	deadline := time.Now().Add(natstest.Timeout)
	for {
		try, cancelTry := context.WithTimeout(ctx, time.Second)
		st, err := js.Stream(try, "S")
		cancelTry()
		if err == nil && st.CachedInfo().State.Msgs == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stream after restart: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A restart whose port is held for a while (here by a listener of the
// test's own, for a second) starts the server as soon as it is free, not
// after a whole Timeout.
func TestRestartWaitsForABusyPort(t *testing.T) {
	// Another process may take a freed port first: try a few servers.
	var srv *natstest.Server
	var l net.Listener
	var err error
	for range 5 {
		srv = natstest.Start(t)
		srv.Shutdown()
		if l, err = net.Listen("tcp", strings.TrimPrefix(srv.URL, "nats://")); err == nil {
			break
		}
	}
	if err != nil {
		t.Fatalf("no freed port could be held: %v", err)
	}
	go func() {
		time.Sleep(time.Second)
		l.Close()
	}()
	start := time.Now()
	srv.Restart()
	if took := time.Since(start); took > 8*time.Second {
		t.Fatalf("Restart took %v, though the port was free after 1s", took)
	}
	nc := srv.Connect(t)
	if !nc.IsConnected() {
		t.Fatal("not connected after the restart")
	}
}
