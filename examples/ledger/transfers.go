package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"

	"github.com/jackc/pgx/v5"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/pgtx"
)

// runTransfers makes every transfer, in order, as a client that retries
// all of them would: those already committed replay their result (the
// outbox row's id) without running.
func runTransfers(ctx context.Context) error {
	s, err := openService(ctx, os.Getenv(envBank))
	if err != nil {
		return err
	}
	defer s.close()
	for _, t := range transfers() {
		var out idem.Outcome
		outboxID, err := pgtx.Do(ctx, s.rt, s.work, "transfer:"+t.ID, func(ctx context.Context, tx pgx.Tx) (string, error) {
			return writeTransfer(ctx, tx, t)
		}, idem.WithOutcome(&out))
		if err != nil {
			return fmt.Errorf("transfer %s: %w", t.ID, err)
		}
		say("transfer %s %v outbox=%s", t.ID, out, outboxID)
		crashAt("after-commit", t.ID)
	}
	return nil
}

// writeTransfer writes t's debit, credit and outbox row in tx, and returns
// the outbox row's id: the transfer's result, which pgtx stores in the
// same transaction. The id is new on every run: only the run that
// commits leaves one.
func writeTransfer(ctx context.Context, tx pgx.Tx, t transfer) (string, error) {
	say("run %s %s", t.ID, claimText(ctx))
	if _, err := tx.Exec(ctx, `INSERT INTO entries (transfer, account, cents) VALUES ($1, $2, $3), ($1, $4, $5)`,
		t.ID, t.From, -t.Cents, t.To, t.Cents); err != nil {
		return "", err
	}
	id, err := newID()
	if err != nil {
		return "", err
	}
	payload, err := json.Marshal(t)
	if err != nil {
		return "", idem.Permanent(err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO outbox (id, transfer, payload) VALUES ($1, $2, $3)`, id, t.ID, payload); err != nil {
		return "", err
	}
	crashAt("before-commit", t.ID)
	return id, nil
}

// newID returns a random outbox id.
func newID() (string, error) {
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "ob-" + hex.EncodeToString(b), nil
}
