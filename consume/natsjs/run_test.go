package natsjs_test

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
)

// unitKey carries what the test's runner hands the handler.
type unitKey struct{}

// Options.Run makes every handler call, the replay of a redelivery too,
// and what it hands the handler through the context reaches it; the
// verdicts are those of idem.Do.
func TestRunMakesTheHandlerCalls(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{ackWait: 300 * time.Millisecond})
	l := newLedger()
	var calls atomic.Int32
	run := func(ctx context.Context, rt *idem.Runtime, key string,
		fn func(context.Context) (struct{}, error), opts ...idem.CallOption) (struct{}, error) {
		calls.Add(1)
		return idem.Do(ctx, rt, key, func(ctx context.Context) (struct{}, error) {
			return fn(context.WithValue(ctx, unitKey{}, key))
		}, opts...)
	}
	a := e.adapter(t, idem.Options{}, consume.Options{}, natsjs.Options{OnVerdict: l.onVerdict, Run: run})
	h := func(ctx context.Context, m *natsjs.Message) error {
		if got, _ := ctx.Value(unitKey{}).(string); got != m.IdemKey {
			return idem.Permanent(errors.New("the handler did not get the runner's context: " + got))
		}
		l.effect(m.Key)
		return nil
	}
	e.consume(t, func(msg jetstream.Msg) {
		if md, err := msg.Metadata(); err == nil && md.NumDelivered == 1 {
			msg = lostAck{msg}
		}
		_, _ = a.Process(context.Background(), msg, h)
	})
	ids := keys("m", 5)
	for _, id := range ids {
		e.publish(t, id)
	}
	for _, id := range ids {
		if got := l.waitVerdicts(t, id, 2); !slices.Equal(got, []string{"ack/executed@1", "ack/replayed@2"}) {
			t.Errorf("%s: verdicts %v, want ack/executed@1 then ack/replayed@2", id, got)
		}
	}
	e.settled(t)
	l.exactlyOnce(t, ids)
	if n := calls.Load(); n != 10 {
		t.Errorf("the runner made %d calls, want 10 (a run and a replay per message)", n)
	}
}

// A runner that fails before calling idem.Do has the message naked with
// the backoff, not acknowledged: nothing ran.
func TestRunErrorNaks(t *testing.T) {
	t.Parallel()
	e := newEnv(t, setup{})
	l := newLedger()
	var fail atomic.Bool
	fail.Store(true)
	run := func(ctx context.Context, rt *idem.Runtime, key string,
		fn func(context.Context) (struct{}, error), opts ...idem.CallOption) (struct{}, error) {
		if fail.Load() {
			return struct{}{}, errors.New("no database")
		}
		return idem.Do(ctx, rt, key, fn, opts...)
	}
	a := e.adapter(t, idem.Options{}, consume.Options{}, natsjs.Options{OnVerdict: func(m *natsjs.Message, v consume.Verdict, err error) {
		l.onVerdict(m, v, err)
		fail.Store(false) // the database is back for the redelivery
	}, Run: run})
	e.consume(t, a.Handler(context.Background(), record(l)))
	e.publish(t, "m")
	if got := l.waitVerdicts(t, "m", 2); !slices.Equal(got, []string{"retry/none@1", "ack/executed@2"}) {
		t.Errorf("verdicts %v, want retry/none@1 then ack/executed@2", got)
	}
	e.settled(t)
	l.exactlyOnce(t, []string{"m"})
}
