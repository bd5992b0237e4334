package natstx_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
	"github.com/idemrt/idem/consume/natsjs/natstx"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/pgtx"
	"github.com/idemrt/idem/store/pgstore"
)

// lostAck drops an acknowledgement: the server redelivers the message
// after AckWait, as it does when the consumer dies after its COMMIT and
// before its acknowledgement.
type lostAck struct{ jetstream.Msg }

func (lostAck) Ack() error { return nil }

// apply is a handler that writes a row for the message in its transaction.
func apply(ctx context.Context, tx pgx.Tx, m *natsjs.Message) error {
	_, err := tx.Exec(ctx, `INSERT INTO applied (key, delivery) VALUES ($1, $2)`, m.Key, m.Metadata.NumDelivered)
	return err
}

// A message whose acknowledgement is lost after its transaction committed
// is redelivered, and the redelivery replays the record that committed
// with the row: one row per message. Until the COMMIT, the row is seen
// only inside the handler's transaction.
func TestRedeliveryAfterTheCommitReplays(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newVerdicts()
	a := e.adapter(t, l)
	h := func(ctx context.Context, tx pgx.Tx, m *natsjs.Message) error {
		if err := apply(ctx, tx, m); err != nil {
			return err
		}
		var inside, outside int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM applied WHERE key = $1`, m.Key).Scan(&inside); err != nil {
			return err
		}
		if err := e.work.QueryRow(ctx, `SELECT count(*) FROM applied WHERE key = $1`, m.Key).Scan(&outside); err != nil {
			return err
		}
		if c, ok := idem.ClaimFrom(ctx); !ok || c.Key != m.IdemKey || inside != 1 || outside != 0 {
			return idem.Permanent(errors.New("the handler's row is not in a transaction of its own, or its claim is missing"))
		}
		return nil
	}
	e.consume(t, func(msg jetstream.Msg) {
		if md, err := msg.Metadata(); err == nil && md.NumDelivered == 1 {
			msg = lostAck{msg}
		}
		_, _ = a.Process(context.Background(), msg, h)
	})
	ids := []string{"m1", "m2", "m3", "m4"}
	for _, id := range ids {
		e.publish(t, id)
	}
	for _, id := range ids {
		if got := l.wait(t, id, 2); !slices.Equal(got, []string{"ack/executed@1", "ack/replayed@2"}) {
			t.Errorf("%s: answers %v, want ack/executed@1 then ack/replayed@2", id, got)
		}
	}
	e.settled(t)
	for _, id := range ids {
		if n := e.applied(t, id); n != 1 {
			t.Errorf("%s applied %d times, want 1", id, n)
		}
	}
}

// A transient error after the handler's write rolls the write back; the
// redelivery runs the handler again and its write commits: one row.
func TestTransientErrorRollsTheWorkBack(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newVerdicts()
	a := e.adapter(t, l)
	e.consume(t, a.Handler(context.Background(), func(ctx context.Context, tx pgx.Tx, m *natsjs.Message) error {
		if err := apply(ctx, tx, m); err != nil {
			return err
		}
		if m.Metadata.NumDelivered == 1 {
			return errors.New("the ledger service timed out")
		}
		return nil
	}))
	e.publish(t, "m")
	if got := l.wait(t, "m", 2); !slices.Equal(got, []string{"retry/executed@1", "ack/executed@2"}) {
		t.Errorf("answers %v, want retry/executed@1 then ack/executed@2", got)
	}
	e.settled(t)
	var delivery int
	if err := e.work.QueryRow(testCtx(t), `SELECT delivery FROM applied WHERE key = 'm'`).Scan(&delivery); err != nil || delivery != 2 {
		t.Errorf("applied by delivery %d (%v), want the second's row only", delivery, err)
	}
}

// A permanent error terminates the message and rolls its work back; one
// marked pgtx.KeepWork keeps it.
func TestPermanentErrorTermsAndKeepWorkKeeps(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	l := newVerdicts()
	a := e.adapter(t, l)
	e.consume(t, a.Handler(context.Background(), func(ctx context.Context, tx pgx.Tx, m *natsjs.Message) error {
		if err := apply(ctx, tx, m); err != nil {
			return err
		}
		refused := errors.New("account closed")
		if m.Key == "keep" {
			return pgtx.KeepWork(refused)
		}
		return idem.Permanent(refused)
	}))
	e.publish(t, "drop")
	e.publish(t, "keep")
	for _, id := range []string{"drop", "keep"} {
		if got := l.wait(t, id, 1); !slices.Equal(got, []string{"term/executed@1"}) {
			t.Errorf("%s: answers %v, want term/executed@1", id, got)
		}
	}
	e.settled(t)
	if d, k := e.applied(t, "drop"), e.applied(t, "keep"); d != 0 || k != 1 {
		t.Errorf("rows: %d of the rolled back message, %d of KeepWork's; want 0 and 1", d, k)
	}
}

func TestNewRefusesWhatCannotCommitTogether(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := testCtx(t)
	opts := natsjs.Options{Consumer: e.consumer(t)}
	if _, err := natstx.New(ctx, nil, opts); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("nil pool: %v", err)
	}
	withRun := opts
	withRun.Run = idem.Do[struct{}]
	if _, err := natstx.New(ctx, e.work, withRun); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("Run set: %v", err)
	}
	mem, err := consume.New(consume.Options{Runtime: idemtest.Runtime(t, idem.Options{}), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := natstx.New(ctx, e.work, natsjs.Options{Consumer: mem}); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("an in-memory store: %v", err)
	}
	other := newPool(t, shared.NewDatabase(t))
	if _, err := natstx.ForConsumer(ctx, e.cons, other, opts); !errors.Is(err, pgstore.ErrOtherDatabase) {
		t.Errorf("a pool on another database: %v", err)
	}
	if _, err := natstx.New(ctx, e.work, natsjs.Options{}); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("no consume.Consumer: %v", err)
	}
	var zero *natstx.Adapter
	if _, err := zero.Process(ctx, nil, apply); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Errorf("Process on a nil adapter: %v", err)
	}
	if _, err := natstx.New(ctx, e.work, opts); err != nil {
		t.Errorf("a pool on the store's database: %v", err)
	}
}
