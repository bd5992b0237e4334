// Command orders is a consumer group of three processes charging orders
// from a NATS JetStream stream, through package consume/natsjs with a
// shared Redis store: every order is charged once, though the stream holds
// each order twice (a producer that retried under a new message id, past
// JetStream's own duplicate window) and one consumer is killed (SIGKILL)
// in the middle of a charge.
//
//	go run ./examples/orders
//
// It needs nothing but Go and redis-server on PATH: the NATS server runs
// inside this process (loopback, a random port, a temporary store), the
// Redis server is a process of the example's own, and the three consumers
// are this program's binary run again. It prints the charges per order
// and exits 1 if any order was charged other than once.
//
// Why the killed consumer's order is still charged once: the consumer
// blocks in that order's handler before it charges, and is killed there.
// The server redelivers the message after AckWait (1s) to another
// consumer, but the dead run still holds the order's key in Redis until
// its lease (3s) ends: that consumer naks the message with the lease left
// (a nak with delay), and the delivery after that takes the key over and
// charges. Killed after the charge, the order would be charged twice: no
// broker or store can tell a charge that happened from one that did not
// when the process dies between the charge and storing its result. The
// report says so if it happens.
package main

import (
	"fmt"
	"os"
	"time"
)

// The stream, its consumer and the timings.
const (
	streamName   = "ORDERS"
	consumerName = "billing"
	consumers    = 3  // consumer processes
	numOrders    = 12 // orders o-01 ... o-12
	victim       = "o-07"

	// ackWait is the consumer's AckWait: a message not acknowledged (nor
	// reported in progress) within it is redelivered. The killed
	// consumer's message comes back after it.
	ackWait = time.Second
	// lease is how long an idem claim holds its order without renewal: a
	// dead consumer's orders are taken over after it. Longer than
	// ackWait, so the redelivery finds the key still held, and waits.
	lease = 3 * time.Second
	// settle is how long a duplicate waits for the run of its order in
	// flight before it is naked with a delay (the lease left).
	settle = 500 * time.Millisecond
	// gateway is the payment provider's round trip.
	gateway = 30 * time.Millisecond
)

func main() {
	if id := os.Getenv(envChild); id != "" {
		os.Exit(consumerMain(id))
	}
	charges, err := run()
	if err != nil {
		fmt.Fprintln(os.Stderr, "orders:", err)
		os.Exit(1)
	}
	if !chargedOnce(charges) {
		fmt.Println("FAIL: an order was not charged exactly once")
		os.Exit(1)
	}
	fmt.Println("every order charged exactly once")
}

// orders returns the orders' ids.
func orders() []string {
	ids := make([]string, numOrders)
	for i := range ids {
		ids[i] = fmt.Sprintf("o-%02d", i+1)
	}
	return ids
}

// chargedOnce reports whether every order was charged exactly once.
func chargedOnce(charges map[string]int) bool {
	for _, id := range orders() {
		if charges[id] != 1 {
			return false
		}
	}
	return true
}

// run starts the servers and the consumers, publishes the orders, kills
// the consumer inside the victim's charge, waits until every message is
// answered, prints the report and returns the charges per order.
func run() (map[string]int, error) {
	dir, err := os.MkdirTemp("", "idem-orders-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	rs, err := startRedis(dir)
	if err != nil {
		return nil, err
	}
	defer rs.stop()
	ns, err := startNATS(dir)
	if err != nil {
		return nil, err
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	d, err := newDemo(ns.ClientURL(), rs.addr)
	if err != nil {
		return nil, err
	}
	defer d.close()
	return d.play()
}
