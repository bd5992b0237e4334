package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go/jetstream"
)

// tally is what the check counts of one transfer.
type tally struct {
	runs        int    // runs of the transfer's function, killed ones too
	entries     int    // ledger rows
	balanced    bool   // the rows sum to zero
	outbox      int    // outbox rows
	outboxID    string // the (last) outbox row's id
	unsent      int    // outbox rows not marked sent
	published   int    // messages in the stream
	msgIDOK     bool   // every message's Nats-Msg-Id is the outbox row's id
	handlerRuns int    // runs of the consumer's handler, killed ones too
	applied     int    // rows in applied
}

// once reports whether the transfer was committed, published and applied
// exactly once.
func (t tally) once() bool {
	return t.entries == 2 && t.balanced && t.outbox == 1 && t.unsent == 0 &&
		t.published == 1 && t.msgIDOK && t.applied == 1
}

// check reads the ledger, the stream and the statements, prints what each
// transfer came to, and reports whether every one was committed, published
// and applied once, with the balances of both databases equal.
func (d *demo) check(ctx context.Context) (bool, error) {
	ts := map[string]*tally{}
	for _, t := range transfers() {
		ts[t.ID] = &tally{msgIDOK: true}
	}
	for _, p := range d.procs {
		for _, l := range p.lines() {
			w := strings.Fields(l)
			if len(w) > 1 && ts[w[1]] != nil && w[0] == "run" {
				ts[w[1]].runs++
			}
			if len(w) > 1 && ts[w[1]] != nil && w[0] == "apply" {
				ts[w[1]].handlerRuns++
			}
		}
	}
	if err := d.readBank(ctx, ts); err != nil {
		return false, err
	}
	msgs, err := d.readStream(ctx, ts)
	if err != nil {
		return false, err
	}
	if err := d.readStatements(ctx, ts); err != nil {
		return false, err
	}
	fmt.Println("4. check: the ledger and outbox (bank), the stream, the applied rows (statements)")
	fmt.Println("   transfer  runs  ledger rows  outbox rows  published  handler runs  applied")
	ok := true
	for _, t := range transfers() {
		c := ts[t.ID]
		mark := ""
		if !c.once() {
			ok, mark = false, "  <- not once"
		}
		fmt.Printf("   %-8s  %4d  %11d  %11d  %9d  %12d  %7d%s\n",
			t.ID, c.runs, c.entries, c.outbox, c.published, c.handlerRuns, c.applied, mark)
	}
	fmt.Printf("   stream %s: %d messages for %d transfers\n", streamName, msgs, numTransfers)
	if msgs != numTransfers {
		ok = false
	}
	same, err := d.balancesAgree(ctx)
	if err != nil {
		return false, err
	}
	ok = ok && same
	if ok {
		fmt.Println("every transfer was committed once, published once (within the stream's duplicate window) and applied once")
	} else {
		fmt.Println("FAIL: a transfer was not committed, published and applied exactly once")
	}
	return ok, nil
}

func (d *demo) readBank(ctx context.Context, ts map[string]*tally) error {
	rows, err := d.bank.Query(ctx, `SELECT transfer, count(*), sum(cents) FROM entries GROUP BY transfer`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id string
		var n int
		var sum int64
		if err := rows.Scan(&id, &n, &sum); err != nil {
			return err
		}
		if c := ts[id]; c != nil {
			c.entries, c.balanced = n, sum == 0
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	rows, err = d.bank.Query(ctx, `SELECT transfer, id, sent_at IS NULL FROM outbox`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id, outboxID string
		var unsent bool
		if err := rows.Scan(&id, &outboxID, &unsent); err != nil {
			return err
		}
		if c := ts[id]; c != nil {
			c.outbox++
			c.outboxID = outboxID
			if unsent {
				c.unsent++
			}
		}
	}
	return rows.Err()
}

// readStream reads every message in the stream and returns how many.
func (d *demo) readStream(ctx context.Context, ts map[string]*tally) (int, error) {
	info, err := d.stream.Info(ctx)
	if err != nil {
		return 0, err
	}
	n := 0
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
		m, err := d.stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return 0, err
		}
		n++
		if c := ts[m.Header.Get(transferHeader)]; c != nil {
			c.published++
			if m.Header.Get(jetstream.MsgIDHeader) != c.outboxID {
				c.msgIDOK = false
			}
		}
	}
	return n, nil
}

func (d *demo) readStatements(ctx context.Context, ts map[string]*tally) error {
	rows, err := d.statements.Query(ctx, `SELECT transfer, outbox_id FROM applied`)
	if err != nil {
		return err
	}
	for rows.Next() {
		var id, outboxID string
		if err := rows.Scan(&id, &outboxID); err != nil {
			return err
		}
		if c := ts[id]; c != nil {
			c.applied++
			if outboxID != c.outboxID {
				c.msgIDOK = false
			}
		}
	}
	return rows.Err()
}

// balancesAgree prints each account's balance in the ledger and in the
// statements, and reports whether they agree.
func (d *demo) balancesAgree(ctx context.Context) (bool, error) {
	ledger, err := sums(ctx, d.bank, `SELECT account, sum(cents) FROM entries GROUP BY account`)
	if err != nil {
		return false, err
	}
	statements, err := sums(ctx, d.statements, `SELECT account, cents FROM balances`)
	if err != nil {
		return false, err
	}
	var parts []string
	for _, a := range slices.Sorted(maps.Keys(ledger)) {
		parts = append(parts, fmt.Sprintf("%s %d", a, ledger[a]))
	}
	same := maps.Equal(ledger, statements)
	verdict := "the same in the statements"
	if !same {
		verdict = fmt.Sprintf("NOT the same in the statements: %v", statements)
	}
	fmt.Printf("   balances in the ledger (cents): %s; %s\n", strings.Join(parts, ", "), verdict)
	return same, nil
}

// sums reads (account, cents) rows from pool.
func sums(ctx context.Context, pool *pgxpool.Pool, sql string) (map[string]int64, error) {
	rows, err := pool.Query(ctx, sql)
	if err != nil {
		return nil, err
	}
	out := map[string]int64{}
	for rows.Next() {
		var a string
		var c int64
		if err := rows.Scan(&a, &c); err != nil {
			return nil, err
		}
		out[a] = c
	}
	return out, rows.Err()
}
