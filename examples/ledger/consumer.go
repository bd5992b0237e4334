package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
	"github.com/idemrt/idem/consume/natsjs/natstx"
)

// runConsumer applies the stream's messages to the statements database
// until ctx ends. Each message is keyed by its Nats-Msg-Id (the outbox
// row's id), and its handler's rows commit with the message's idempotency
// record (natstx): a message redelivered after its COMMIT replays instead
// of applying again.
func runConsumer(ctx context.Context) error {
	s, err := openService(ctx, os.Getenv(envStatements))
	if err != nil {
		return err
	}
	defer s.close()
	nc, err := nats.Connect(os.Getenv(envNATS))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	cons, err := js.Consumer(ctx, streamName, consumerName)
	if err != nil {
		return err
	}
	quiet := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	c, err := consume.New(consume.Options{
		Runtime: s.rt,
		// A redelivery that finds its key held by a dead run waits this
		// long, then goes back to the server until the dead run's lease
		// has ended; the delivery after that takes the key over.
		Policy:   idem.Policy{Settle: 500 * time.Millisecond},
		MaxDelay: lease,
		Logger:   quiet,
	})
	if err != nil {
		return err
	}
	a, err := natstx.ForConsumer(ctx, cons, s.work, natsjs.Options{
		Consumer:  c,
		Conn:      nc,
		OnVerdict: tell,
		Logger:    quiet,
	})
	if err != nil {
		return err
	}
	h := apply(os.Getenv(envName))
	// Two messages at a time: only the message being handled is kept in
	// progress, and those waiting behind it would be redelivered after
	// AckWait.
	cc, err := cons.Consume(func(msg jetstream.Msg) {
		_, _ = a.Process(ctx, ackGate{msg}, h)
	}, jetstream.PullMaxMessages(2))
	if err != nil {
		return err
	}
	<-ctx.Done()
	cc.Stop()
	<-cc.Closed()
	return nil
}

// apply is the handler: it records the transfer as applied by process and
// moves the balances, in tx.
func apply(process string) natstx.HandlerFunc {
	return func(ctx context.Context, tx pgx.Tx, m *natsjs.Message) error {
		var t transfer
		if err := json.Unmarshal(m.Data(), &t); err != nil {
			return idem.Permanent(err) // never valid: the message is terminated
		}
		say("apply %s %s", t.ID, claimText(ctx))
		if _, err := tx.Exec(ctx, `INSERT INTO applied (transfer, outbox_id, process) VALUES ($1, $2, $3)`,
			t.ID, m.Key, process); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO balances (account, cents) VALUES ($1, $2), ($3, $4)
			ON CONFLICT (account) DO UPDATE SET cents = balances.cents + EXCLUDED.cents`,
			t.From, -t.Cents, t.To, t.Cents); err != nil {
			return err
		}
		crashAt("consumer-before-commit", t.ID)
		return nil
	}
}

// ackGate is a message whose acknowledgement first passes the crash point
// "consumer-after-commit": the adapter acknowledges only after the
// handler's transaction has committed.
type ackGate struct{ jetstream.Msg }

func (m ackGate) Ack() error {
	crashAt("consumer-after-commit", m.Headers().Get(transferHeader))
	return m.Msg.Ack()
}

// tell reports the answer to a message.
func tell(m *natsjs.Message, v consume.Verdict, ackErr error) {
	if ackErr != nil {
		return // not answered: the server redelivers it
	}
	say("verdict %s %v %v delivery=%d", m.Headers().Get(transferHeader), v.Decision, v.Outcome, m.Metadata.NumDelivered)
}
