// Command ledger is the outbox pattern with idem, killed at every step:
// a transfer writes its ledger rows and an outbox row in one PostgreSQL
// transaction (package pgtx); a relay publishes the outbox to NATS
// JetStream with the outbox row's id as Nats-Msg-Id; a consumer applies
// each message to a database of its own, its rows and the message's
// idempotency record in one transaction (package consume/natsjs/natstx).
//
//	go run ./examples/ledger     (or: make ledger)
//
// Each step runs as a process of its own (this program's binary run
// again), and each is killed with SIGKILL once where a crash hurts most:
// a transfer before its COMMIT and another after it, the relay after a
// publish and before it marks the row sent, the consumer inside a
// handler before its COMMIT and after a COMMIT before the
// acknowledgement. A new process takes over each time. At the end the
// program reads the ledger, the stream and the consumer's database, and
// prints that every transfer was committed once, published once and
// applied once, or exits 1 saying which was not.
//
// It needs nothing but Go and PostgreSQL's programs (initdb, postgres;
// make ledger installs Debian's package when they are missing): it starts
// a PostgreSQL server of its own on a free loopback port, in a temporary
// directory, and runs the NATS server inside this process. Neither is a
// server already running on the machine. See README.md for what each kill
// shows, and what happens past the stream's duplicate window.
package main

import (
	"fmt"
	"os"
	"time"
)

// The timings, short so that the run takes seconds.
const (
	// lease is how long a dead process's claim holds its key: a transfer
	// or a message it was running is taken over after it.
	lease = 2 * time.Second
	// settle is how long a call waits for a run of its key in flight
	// (another process's, a dead one's included) before giving up;
	// longer than lease, so a retry waits out a dead run and takes its
	// key over.
	settle = 3 * lease
	// ackWait is the JetStream consumer's AckWait: a message a dead
	// consumer did not acknowledge is redelivered after it.
	ackWait = time.Second
	// dupWindow is the stream's duplicate window: a message published
	// again under the same Nats-Msg-Id within it is dropped.
	dupWindow = 2 * time.Minute
)

// The stream and its durable consumer.
const (
	streamName   = "LEDGER"
	subject      = "ledger.transfers"
	consumerName = "statements"
)

func main() {
	if role := os.Getenv(envRole); role != "" {
		os.Exit(childMain(role))
	}
	ok, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ledger:", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}
