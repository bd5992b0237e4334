package natstx_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
	"github.com/idemrt/idem/consume/natsjs/natstx"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/natstest"
	"github.com/idemrt/idem/store/pgstore"
)

// env is a test's world: a NATS server with a stream S (subjects s.>) and
// a durable consumer c on it, and a database of the test's own with the
// store's table, a pool for the store and one for the handlers' work, and
// an "applied" table the handlers write to (no unique constraint: nothing
// but the transaction keeps a message from applying twice).
type env struct {
	cons  jetstream.Consumer
	js    jetstream.JetStream
	dsn   string
	store *pgstore.Store
	work  *pgxpool.Pool
	rt    *idem.Runtime
}

func testCtx(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), idemtest.Timeout)
	t.Cleanup(cancel)
	return ctx
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := testCtx(t)
	srv := natstest.Start(t)
	js, err := jetstream.New(srv.Connect(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.CreateStream(ctx, jetstream.StreamConfig{Name: "S", Subjects: []string{"s.>"}}); err != nil {
		t.Fatal(err)
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, "S", jetstream.ConsumerConfig{
		Durable: "c", AckPolicy: jetstream.AckExplicitPolicy, AckWait: 500 * time.Millisecond, MaxDeliver: -1})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{cons: cons, js: js, dsn: shared.NewDatabase(t)}
	e.work = newPool(t, e.dsn)
	e.store, err = pgstore.New(ctx, newPool(t, e.dsn), pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.store.Close() })
	if err := e.store.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e.work.Exec(ctx, `CREATE TABLE applied (id bigserial PRIMARY KEY, key text NOT NULL, delivery int NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	e.rt = idemtest.Runtime(t, idem.Options{Store: e.store, Policy: idem.Policy{Lease: 2 * time.Second}})
	return e
}

func newPool(t testing.TB, dsn string) *pgxpool.Pool {
	t.Helper()
	p, err := pgxpool.New(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// consumer returns a consume.Consumer on e's runtime.
func (e *env) consumer(t *testing.T) *consume.Consumer {
	t.Helper()
	c, err := consume.New(consume.Options{Runtime: e.rt, MinDelay: 50 * time.Millisecond, MaxDelay: time.Second,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// adapter returns a natstx adapter for e's consumer, its handlers' work on
// e.work; verdicts go to l.
func (e *env) adapter(t *testing.T, l *verdicts) *natstx.Adapter {
	t.Helper()
	a, err := natstx.ForConsumer(testCtx(t), e.cons, e.work, natsjs.Options{Consumer: e.consumer(t),
		OnVerdict: l.add, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// consume runs handle on e's consumer until the end of the test.
func (e *env) consume(t *testing.T, handle jetstream.MessageHandler) {
	t.Helper()
	cc, err := e.cons.Consume(handle, jetstream.PullMaxMessages(4), jetstream.PullExpiry(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Stop()
		<-cc.Closed()
	})
}

// publish publishes a message with Nats-Msg-Id id.
func (e *env) publish(t *testing.T, id string) {
	t.Helper()
	msg := nats.NewMsg("s.x")
	msg.Header.Set(jetstream.MsgIDHeader, id)
	msg.Data = []byte("payload of " + id)
	if _, err := e.js.PublishMsg(testCtx(t), msg); err != nil {
		t.Fatal(err)
	}
}

// settled waits until e's consumer has nothing pending or unacknowledged.
func (e *env) settled(t *testing.T) {
	t.Helper()
	idemtest.Eventually(t, "every message answered", func() bool {
		ci, err := e.cons.Info(testCtx(t))
		return err == nil && ci.NumPending == 0 && ci.NumAckPending == 0
	})
}

// applied returns the rows key applied.
func (e *env) applied(t *testing.T, key string) int {
	t.Helper()
	var n int
	if err := e.work.QueryRow(testCtx(t), `SELECT count(*) FROM applied WHERE key = $1`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// verdicts lists the answers per message key, as
// "<decision>/<outcome>@<delivery>".
type verdicts struct {
	mu sync.Mutex
	m  map[string][]string
}

func newVerdicts() *verdicts { return &verdicts{m: map[string][]string{}} }

func (l *verdicts) add(m *natsjs.Message, v consume.Verdict, _ error) {
	l.mu.Lock()
	l.m[m.Key] = append(l.m[m.Key], fmt.Sprintf("%v/%v@%d", v.Decision, v.Outcome, m.Metadata.NumDelivered))
	l.mu.Unlock()
}

// wait waits until key has n answers and returns them.
func (l *verdicts) wait(t *testing.T, key string, n int) []string {
	t.Helper()
	var got []string
	idemtest.Eventually(t, fmt.Sprintf("%d answers for %s", n, key), func() bool {
		l.mu.Lock()
		defer l.mu.Unlock()
		got = append([]string(nil), l.m[key]...)
		return len(got) >= n
	})
	return got
}
