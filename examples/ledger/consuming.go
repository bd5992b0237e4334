package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// consume: a consumer killed inside a handler before its COMMIT, one killed
// after a COMMIT and before the acknowledgement, and one that runs until
// every message is answered.
func (d *demo) consume(ctx context.Context) error {
	fmt.Println("3. consumer: applies each message to the statements database, keyed by its Nats-Msg-Id " +
		"(the outbox id); the handler's rows commit with the message's idem record (natstx)")
	for _, crash := range []string{"consumer-before-commit t-02", "consumer-after-commit t-06"} {
		p, err := d.crash("consumer", crash)
		if err != nil {
			return err
		}
		fmt.Printf("   %s: %s\n", p.name, describe(p))
	}
	p, err := d.start("consumer", "")
	if err != nil {
		return err
	}
	if err := d.answered(ctx); err != nil {
		return err
	}
	if err := p.stop(stepTimeout); err != nil {
		return err
	}
	fmt.Printf("   %s: %s\n\n", p.name, describe(p))
	return nil
}

// answered waits until every transfer's message was acknowledged by a
// consumer and the server holds none unanswered.
func (d *demo) answered(ctx context.Context) error {
	deadline := time.Now().Add(stepTimeout)
	for {
		acked := map[string]bool{}
		for _, p := range d.procs {
			for _, l := range p.lines() {
				if w := strings.Fields(l); len(w) > 2 && w[0] == "verdict" && w[2] == "ack" {
					acked[w[1]] = true
				}
			}
		}
		if len(acked) == numTransfers {
			info, err := d.cons.Info(ctx)
			if err != nil {
				return err
			}
			if info.NumPending == 0 && info.NumAckPending == 0 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the consumer acknowledged %d of %d transfers within %v", len(acked), numTransfers, stepTimeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
