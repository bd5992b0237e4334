package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// transferHeader names a message's transfer, for the report; the consumer
// keys messages by their Nats-Msg-Id, the outbox row's id.
const transferHeader = "Transfer-Id"

// runRelay publishes the outbox rows not yet sent, in order, each with its
// id as Nats-Msg-Id, and marks each sent once JetStream has stored it;
// it returns when none is left. A relay killed between the publish and the
// mark publishes the row again when it restarts: JetStream drops the copy
// (its duplicate window is keyed by Nats-Msg-Id), and the relay marks the
// row sent.
//
// One relay at a time here. Relays running side by side would publish
// some rows twice, and JetStream would drop the copies in the same way;
// to spare that work, claim rows with SELECT ... FOR UPDATE SKIP LOCKED.
func runRelay(ctx context.Context) error {
	pool, err := pgxpool.New(ctx, os.Getenv(envBank))
	if err != nil {
		return err
	}
	defer pool.Close()
	nc, err := nats.Connect(os.Getenv(envNATS))
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	for {
		rows, err := pool.Query(ctx, `SELECT id, transfer, payload FROM outbox WHERE sent_at IS NULL ORDER BY seq LIMIT 100`)
		if err != nil {
			return err
		}
		type row struct {
			id, transfer string
			payload      []byte
		}
		var batch []row
		for rows.Next() {
			var r row
			if err := rows.Scan(&r.id, &r.transfer, &r.payload); err != nil {
				return err
			}
			batch = append(batch, r)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		for _, r := range batch {
			msg := nats.NewMsg(subject)
			msg.Header.Set(jetstream.MsgIDHeader, r.id)
			msg.Header.Set(transferHeader, r.transfer)
			msg.Data = r.payload
			ack, err := publish(ctx, js, msg)
			if err != nil {
				return fmt.Errorf("publish %s: %w", r.id, err)
			}
			say("publish %s outbox=%s seq=%d duplicate=%v", r.transfer, r.id, ack.Sequence, ack.Duplicate)
			crashAt("mid-relay", r.transfer)
			if _, err := pool.Exec(ctx, `UPDATE outbox SET sent_at = now() WHERE id = $1`, r.id); err != nil {
				return err
			}
		}
	}
}

// publish publishes msg and waits for JetStream to store it (or to say it
// holds it already: ack.Duplicate), within 5s.
func publish(ctx context.Context, js jetstream.JetStream, msg *nats.Msg) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	return js.PublishMsg(ctx, msg)
}
