package main

import "fmt"

// transfer moves cents from one account to another. Its id is its
// idempotency key: a client that retries a transfer sends the same id.
type transfer struct {
	ID    string `json:"transfer"`
	From  string `json:"from"`
	To    string `json:"to"`
	Cents int64  `json:"cents"`
}

// numTransfers is how many transfers the run makes.
const numTransfers = 8

var accounts = []string{"alice", "bob", "carol", "dave"}

// transfers returns the run's transfers: t-01 ... t-08, round the
// accounts.
func transfers() []transfer {
	ts := make([]transfer, numTransfers)
	for i := range ts {
		ts[i] = transfer{
			ID:    fmt.Sprintf("t-%02d", i+1),
			From:  accounts[i%len(accounts)],
			To:    accounts[(i+1)%len(accounts)],
			Cents: int64(100*(i+1) + 25),
		}
	}
	return ts
}

// The two databases, as two services would have them: bank holds the
// ledger and the outbox (the transfer service's), statements the balances
// the consumer keeps. Each holds the idem records of its own service
// (pgstore's table), beside the rows they protect.
//
// No table has a unique constraint on the transfer: nothing but idem keeps
// a transfer from being written, or applied, twice.
const (
	bankSchema = `
CREATE TABLE entries (
	id       bigserial PRIMARY KEY,
	transfer text   NOT NULL,
	account  text   NOT NULL,
	cents    bigint NOT NULL  -- negative: a debit
);
CREATE TABLE outbox (
	seq      bigserial PRIMARY KEY,     -- the relay's order
	id       text   NOT NULL UNIQUE,    -- published as Nats-Msg-Id
	transfer text   NOT NULL,
	payload  jsonb  NOT NULL,
	sent_at  timestamptz                -- set by the relay once published
);`

	statementsSchema = `
CREATE TABLE balances (
	account text PRIMARY KEY,
	cents   bigint NOT NULL
);
CREATE TABLE applied (
	id        bigserial PRIMARY KEY,
	transfer  text NOT NULL,
	outbox_id text NOT NULL,
	process   text NOT NULL
);`
)
