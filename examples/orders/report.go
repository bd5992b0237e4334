package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// waitAnswered waits until the server has delivered every message and
// holds none unacknowledged, and the consumers have counted at least
// stored acknowledgements (one per message, more if one was lost on the
// way and the redelivery replayed).
func (d *demo) waitAnswered(ctx context.Context, stored int) error {
	return poll(ctx, "every message to be acknowledged", func() (bool, error) {
		info, err := d.cons.Info(ctx)
		if err != nil || info.NumPending > 0 || info.NumAckPending > 0 {
			return false, err
		}
		t, err := d.tallies(ctx)
		return t.acks() >= stored, err
	})
}

// tally is the consumers' answers, by order and by "<decision> <outcome>".
type tally map[string]map[string]int

func (d *demo) tallies(ctx context.Context) (tally, error) {
	t := tally{}
	for _, order := range orders() {
		m, err := d.rc.HGetAll(ctx, keyVerdicts+order).Result()
		if err != nil {
			return nil, err
		}
		t[order] = map[string]int{}
		for what, s := range m {
			t[order][what], _ = strconv.Atoi(s)
		}
	}
	return t, nil
}

// count sums the answers whose "<decision> <outcome>" starts with prefix.
func (t tally) count(order, prefix string) int {
	n := 0
	for what, c := range t[order] {
		if strings.HasPrefix(what, prefix) {
			n += c
		}
	}
	return n
}

func (t tally) acks() int {
	n := 0
	for order := range t {
		n += t.count(order, "ack ")
	}
	return n
}

// report prints what the consumers answered, what the victim's handler
// did, and the charges per order, which it returns.
func (d *demo) report(ctx context.Context) (map[string]int, error) {
	t, err := d.tallies(ctx)
	if err != nil {
		return nil, err
	}
	ran, naks := 0, []string{}
	for _, order := range orders() {
		ran += t.count(order, "ack executed")
		if n := t.count(order, "retry "); n > 0 {
			naks = append(naks, fmt.Sprintf("%s ×%d", order, n))
		}
		if n := t.count(order, "term "); n > 0 {
			return nil, fmt.Errorf("%s: %d message(s) terminated", order, n)
		}
	}
	fmt.Printf("%d acknowledgements: %d ran the charge, %d duplicates got its result (stored, or waited for) without charging\n",
		t.acks(), ran, t.acks()-ran)
	if len(naks) == 0 {
		naks = append(naks, "none")
	}
	fmt.Printf("naks with the lease left (the order was held by a run elsewhere): %s\n", strings.Join(naks, ", "))
	charges := map[string]int{}
	for _, order := range orders() {
		n, err := d.rc.Get(ctx, keyCharges+order).Int()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, err
		}
		charges[order] = n
	}
	if err := d.explainVictim(ctx, charges[victim]); err != nil {
		return nil, err
	}
	printCharges(charges)
	return charges, nil
}

// explainVictim says how often the killed consumer's order ran and was
// charged, and why.
func (d *demo) explainVictim(ctx context.Context, charged int) error {
	runs, err := d.rc.LLen(ctx, keyRuns+victim).Result()
	if err != nil {
		return err
	}
	switch charged {
	case 1:
		fmt.Printf("%s's handler ran %d times (the killed run, stopped before its charge, and the run that took its key over); charged once\n",
			victim, runs)
		fmt.Printf("  (here only a kill runs a handler twice, and had it come after the charge, %s would have been charged twice)\n", victim)
	case 2:
		fmt.Printf("%s was charged twice: its consumer was killed after the charge and before the result was stored, "+
			"and nothing can tell that charge from none\n", victim)
	default:
		fmt.Printf("%s's handler ran %d times; charged %d times\n", victim, runs, charged)
	}
	return nil
}

// printCharges prints the charges per order, in order.
func printCharges(charges map[string]int) {
	fmt.Println("charges per order:")
	for _, id := range orders() {
		fmt.Printf("  %s charged %d time(s)\n", id, charges[id])
	}
}
