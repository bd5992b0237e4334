package natsjs_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/natstest"
)

// serverVersion is a natsjs.ServerConn connected to a server of its
// version ("" for none).
type serverVersion string

func (v serverVersion) ConnectedServerVersion() string { return string(v) }

func TestTermReasonHonoured(t *testing.T) {
	for v, want := range map[string]bool{
		"2.9.10": false, "2.9.25": false, "2.10.0": false, "2.10.3": false, "2.10.4": true,
		"2.10.29": true, "2.11.0-RC.1": true, "2.15.3": true, "3.0.0": true, "v2.10.4": true,
		"1.99.99": false, "2.10.4-RC.1": false, "2.10.5-RC.1": true, "2.10.4+build": true, "": false, "2.x": false, "unknown": false,
	} {
		if got := natsjs.TermReasonHonoured(v); got != want {
			t.Errorf("TermReasonHonoured(%q) = %v, want %v", v, got, want)
		}
	}
}

// A termination carries its reason only to a server that honours it; a
// plain Term otherwise, and whenever the version is unknown.
func TestTermFormFollowsTheServerVersion(t *testing.T) {
	var disconnected *nats.Conn // reports no version, as while reconnecting
	for _, tc := range []struct {
		name string
		conn natsjs.ServerConn
		want string
	}{
		{"no conn", nil, "term"},
		{"nil *nats.Conn", disconnected, "term"},
		{"reconnecting", serverVersion(""), "term"},
		{"2.9.10", serverVersion("2.9.10"), "term"},
		{"2.10.3", serverVersion("2.10.3"), "term"},
		{"2.10.4", serverVersion("2.10.4"), "term idem: declined"},
		{"2.15.3", serverVersion("2.15.3"), "term idem: declined"},
	} {
		a, _ := fakeAdapter(t, natsjs.Options{Conn: tc.conn})
		if tc.conn == nil { // fakeAdapter's default is a recent server
			c, err := consume.New(consume.Options{Runtime: idemtest.Runtime(t, idem.Options{}), Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				t.Fatal(err)
			}
			if a, err = natsjs.New(natsjs.Options{Consumer: c, Logger: slog.New(slog.DiscardHandler)}); err != nil {
				t.Fatal(err)
			}
		}
		m := newFake("m", 1)
		a.Process(context.Background(), m, func(context.Context, *natsjs.Message) error {
			return idem.Permanent(errors.New("declined"))
		})
		if got := m.Answers(); !slices.Equal(got, []string{tc.want}) {
			t.Errorf("%s: answers %q, want %q", tc.name, got, tc.want)
		}
	}
}

// What the fallback is for: a Term with a reason terminates the message
// on a server from 2.10.4 on, and is ignored by an older one, which
// redelivers the message after AckWait.
func TestServerAndTermWithReason(t *testing.T) { onEachServer(t, testServerAndTermWithReason) }

func testServerAndTermWithReason(t *testing.T, server natstest.Kind) {
	e := newEnv(t, setup{ackWait: 300 * time.Millisecond, server: server})
	var mu sync.Mutex
	deliveries := 0
	e.consume(t, func(msg jetstream.Msg) {
		mu.Lock()
		deliveries++
		mu.Unlock()
		_ = msg.TermWithReason("test")
	})
	e.publish(t, "m")
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return deliveries
	}
	version := e.nc.ConnectedServerVersion()
	if !natsjs.TermReasonHonoured(version) {
		idemtest.Eventually(t, "server "+version+" redelivers after TermWithReason", func() bool { return count() >= 2 })
		return
	}
	time.Sleep(time.Second) // three AckWaits: a redelivery would show
	if n := count(); n != 1 {
		t.Fatalf("server %s: %d deliveries after TermWithReason, want 1", version, n)
	}
	e.settled(t)
}

// A message id reused for another payload, under Options.Fingerprint, is
// terminated (never redelivered, the consumer drains) on every server.
func TestFingerprintMismatchTerminates(t *testing.T) {
	onEachServer(t, testFingerprintMismatchTerminates)
}

func testFingerprintMismatchTerminates(t *testing.T, server natstest.Kind) {
	e := newEnv(t, setup{dupWindow: 200 * time.Millisecond, ackWait: 300 * time.Millisecond, server: server})
	l := newLedger()
	var mu sync.Mutex
	var errs []error
	a := e.adapter(t, idem.Options{}, consume.Options{}, natsjs.Options{Fingerprint: true,
		OnVerdict: func(m *natsjs.Message, v consume.Verdict, ackErr error) {
			mu.Lock()
			errs = append(errs, v.Err)
			mu.Unlock()
			l.onVerdict(m, v, ackErr)
		}})
	e.consume(t, a.Handler(context.Background(), record(l)))
	e.publish(t, "k")
	l.waitVerdicts(t, "k", 1)
	msg := nats.NewMsg("s.x")
	msg.Header.Set(jetstream.MsgIDHeader, "k")
	msg.Data = []byte("another payload")
	idemtest.Eventually(t, "a publish past the duplicate window", func() bool {
		ack, err := e.js.PublishMsg(testCtx(t), msg)
		if err != nil {
			t.Fatalf("publish of another payload: %v", err)
		}
		if ack.Duplicate {
			time.Sleep(50 * time.Millisecond) // the window is 200ms
		}
		return !ack.Duplicate
	})
	if got := l.waitVerdicts(t, "k", 2); got[1] != "term/none@1" {
		t.Fatalf("verdicts %v, want the second terminated", got)
	}
	time.Sleep(time.Second) // three AckWaits: a redelivery would show
	e.settled(t)
	mu.Lock()
	defer mu.Unlock()
	if got := l.verdictsOf("k"); len(got) != 2 || !errors.Is(errs[1], idem.ErrFingerprintMismatch) {
		t.Fatalf("verdicts %v, errors %v; want two, the second ErrFingerprintMismatch", got, errs)
	}
	l.exactlyOnce(t, []string{"k"})
}
