package natsjs_test

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
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

const (
	streamName   = "S"
	consumerName = "c"
)

// env is a server with a stream S (subjects s.>) and a durable pull
// consumer c on it.
type env struct {
	srv  natstest.Broker
	nc   *nats.Conn
	js   jetstream.JetStream
	cons jetstream.Consumer
}

type setup struct {
	dupWindow time.Duration // the stream's duplicate window (default: the server's)
	ackWait   time.Duration // default 500ms
	server    natstest.Kind // default natstest.Embedded
}

func newEnv(t *testing.T, s setup) *env {
	t.Helper()
	if s.ackWait == 0 {
		s.ackWait = 500 * time.Millisecond
	}
	if s.server == "" {
		s.server = natstest.Embedded
	}
	e := &env{srv: natstest.StartKind(t, s.server)}
	e.nc = e.srv.Connect(t)
	js, err := jetstream.New(e.nc)
	if err != nil {
		t.Fatal(err)
	}
	e.js = js
	ctx := testCtx(t)
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: streamName, Subjects: []string{"s.>"},
		Duplicates: s.dupWindow}); err != nil {
		t.Fatal(err)
	}
	e.cons, err = js.CreateOrUpdateConsumer(ctx, streamName, jetstream.ConsumerConfig{
		Durable: consumerName, AckPolicy: jetstream.AckExplicitPolicy, AckWait: s.ackWait, MaxDeliver: -1})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// onEachServer runs test as a parallel subtest on each kind of server
// (natstest.Kinds): the module's embedded server and the nats-server
// binary on PATH (2.9.10 on Debian 12).
func onEachServer(t *testing.T, test func(t *testing.T, server natstest.Kind)) {
	t.Helper()
	for _, k := range natstest.Kinds {
		t.Run(string(k), func(t *testing.T) {
			t.Parallel()
			test(t, k)
		})
	}
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), idemtest.Timeout)
	t.Cleanup(cancel)
	return ctx
}

// publish publishes a message with Nats-Msg-Id id (none if "") on s.<id>.
func (e *env) publish(t testing.TB, id string) *jetstream.PubAck {
	t.Helper()
	msg := nats.NewMsg("s.x")
	if id != "" {
		msg.Header.Set(jetstream.MsgIDHeader, id)
	}
	msg.Data = []byte("payload of " + id)
	// Retried while the server restarts (Nats-Msg-Id dedups a retry
	// whose first try was stored); a publish sent while the client
	// reconnects can go unanswered, so each try of a keyed message gets
	// 2s of its own.
	deadline := time.Now().Add(idemtest.Timeout)
	for {
		try := idemtest.Timeout
		if id != "" {
			try = 2 * time.Second
		}
		ctx, cancel := context.WithTimeout(context.Background(), try)
		ack, err := e.js.PublishMsg(ctx, msg)
		cancel()
		if err == nil {
			return ack
		}
		if id == "" || time.Now().After(deadline) {
			t.Fatalf("publish %s: %v", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// adapter returns an adapter for e's consumer on a runtime of rtOpts
// (in-memory store unless set), with co and o.
func (e *env) adapter(t *testing.T, rtOpts idem.Options, co consume.Options, o natsjs.Options) *natsjs.Adapter {
	t.Helper()
	co.Runtime = idemtest.Runtime(t, rtOpts)
	if co.MinDelay == 0 {
		co.MinDelay = 50 * time.Millisecond
	}
	if co.MaxDelay == 0 {
		co.MaxDelay = 2 * time.Second
	}
	if co.Logger == nil {
		co.Logger = slog.New(slog.DiscardHandler)
	}
	c, err := consume.New(co)
	if err != nil {
		t.Fatal(err)
	}
	o.Consumer = c
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Conn == nil {
		o.Conn = e.nc
	}
	a, err := natsjs.ForConsumer(e.cons, o)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// consume runs handle on e's consumer until the end of the test.
func (e *env) consume(t *testing.T, handle jetstream.MessageHandler) {
	t.Helper()
	cc, err := e.cons.Consume(handle, jetstream.PullHeartbeat(time.Second), jetstream.PullExpiry(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Stop()
		select {
		case <-cc.Closed():
		case <-time.After(idemtest.Timeout):
			t.Error("the consumer did not stop")
		}
	})
}

// info returns e's consumer's info from the server.
func (e *env) info(t testing.TB) *jetstream.ConsumerInfo {
	t.Helper()
	ci, err := e.cons.Info(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return ci
}

// settled waits until e's consumer has drained: nothing pending, nothing
// unacknowledged, and its ack floor at the last message delivered.
func (e *env) settled(t *testing.T) {
	t.Helper()
	idemtest.Eventually(t, "every message answered", func() bool {
		ci, err := e.cons.Info(testCtx(t))
		return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0 && ci.AckFloor.Stream == ci.Delivered.Stream
	})
}

// ledger counts effects and verdicts per message key.
type ledger struct {
	mu       sync.Mutex
	effects  map[string]int
	verdicts map[string][]string // "<decision>/<outcome>@<delivery>"
}

func newLedger() *ledger {
	return &ledger{effects: map[string]int{}, verdicts: map[string][]string{}}
}

func (l *ledger) effect(key string) {
	l.mu.Lock()
	l.effects[key]++
	l.mu.Unlock()
}

func (l *ledger) onVerdict(m *natsjs.Message, v consume.Verdict, _ error) {
	l.mu.Lock()
	l.verdicts[m.Key] = append(l.verdicts[m.Key], fmt.Sprintf("%v/%v@%d", v.Decision, v.Outcome, m.Metadata.NumDelivered))
	l.mu.Unlock()
}

func (l *ledger) count(key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.effects[key]
}

func (l *ledger) verdictsOf(key string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.verdicts[key]...)
}

// waitVerdicts waits until key has n verdicts.
func (l *ledger) waitVerdicts(t *testing.T, key string, n int) []string {
	t.Helper()
	idemtest.Eventually(t, fmt.Sprintf("%d verdicts for %s", n, key), func() bool { return len(l.verdictsOf(key)) >= n })
	return l.verdictsOf(key)
}

// exactlyOnce fails the test unless each of keys had exactly one effect and
// no other key had any.
func (l *ledger) exactlyOnce(t *testing.T, keys []string) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	want := map[string]bool{}
	for _, k := range keys {
		want[k] = true
		if n := l.effects[k]; n != 1 {
			t.Errorf("message %s: %d effects, want 1 (verdicts %v)", k, n, l.verdicts[k])
		}
	}
	var extra []string
	for k := range l.effects {
		if !want[k] {
			extra = append(extra, k)
		}
	}
	sort.Strings(extra)
	if len(extra) > 0 {
		t.Errorf("effects of unexpected messages %v", extra)
	}
}

func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%03d", prefix, i)
	}
	return out
}
