// Command quickstart shows idem's core promise on the embedded in-memory
// store: a storm of duplicate requests for one idempotency key runs the side
// effect once, every duplicate gets the same result the moment it settles,
// and a later retry gets the stored result without running anything.
//
//	go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"log"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemrt/idem"
)

// Receipt is what charging a card returns.
type Receipt struct {
	ID     string
	Amount int
}

func main() {
	ctx := context.Background()
	rt, err := idem.New(idem.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer rt.Close(ctx)
	g := &gateway{}

	const duplicates = 1000
	fmt.Printf("%d concurrent requests for key charge:order-1 ...\n", duplicates)
	got := sendDuplicates(ctx, rt, g, duplicates)
	fmt.Printf("card charged %d time(s)\n", g.charges.Load())
	got.print()

	var how idem.Outcome
	r, err := idem.Do(ctx, rt, "charge:order-1", g.charge, idem.WithOutcome(&how))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("a retry later: %s, receipt %s; card charged %d time(s) in all\n", how, r.ID, g.charges.Load())
	if g.charges.Load() != 1 {
		log.Fatal("the side effect ran more than once")
	}
}

// gateway is the payment gateway: charging the card is the side effect
// that must happen once.
type gateway struct {
	charges atomic.Int32
	settled atomic.Int64 // when the charge returned, in Unix nanoseconds
}

func (g *gateway) charge(context.Context) (Receipt, error) {
	g.charges.Add(1)
	time.Sleep(50 * time.Millisecond) // the gateway's round trip
	g.settled.Store(time.Now().UnixNano())
	return Receipt{ID: "rcpt-8812", Amount: 4200}, nil
}

// answers is what the duplicate requests got.
type answers struct {
	mu       sync.Mutex
	outcomes map[idem.Outcome]int
	waits    []time.Duration // how long after the charge each duplicate got its answer
	receipts map[Receipt]int
}

// sendDuplicates sends n concurrent requests to charge order-1, all with
// one idempotency key, and collects their answers.
func sendDuplicates(ctx context.Context, rt *idem.Runtime, g *gateway, n int) *answers {
	a := &answers{outcomes: map[idem.Outcome]int{}, receipts: map[Receipt]int{}}
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			var how idem.Outcome
			r, err := idem.Do(ctx, rt, "charge:order-1", g.charge,
				idem.WithSettle(3*time.Second), idem.WithOutcome(&how))
			done := time.Now().UnixNano()
			a.add(r, how, err, time.Duration(done-g.settled.Load()))
		})
	}
	wg.Wait()
	return a
}

// add records one answer; wait is how long after the charge returned it
// came.
func (a *answers) add(r Receipt, how idem.Outcome, err error, wait time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if err != nil {
		log.Printf("request failed: %v", err)
		return
	}
	a.outcomes[how]++
	a.receipts[r]++
	if how == idem.Joined {
		a.waits = append(a.waits, wait)
	}
}

// print shows how the requests got their answers, which receipts they got,
// and how soon the duplicates were released.
func (a *answers) print() {
	fmt.Printf("outcomes: executed %d, joined %d, replayed %d\n",
		a.outcomes[idem.Executed], a.outcomes[idem.Joined], a.outcomes[idem.Replayed])
	for r, n := range a.receipts {
		fmt.Printf("receipt %s for %d cents, returned to %d callers\n", r.ID, r.Amount, n)
	}
	if len(a.waits) > 0 {
		sort.Slice(a.waits, func(i, j int) bool { return a.waits[i] < a.waits[j] })
		fmt.Printf("duplicates released after the charge returned: p50 %v, p99 %v\n",
			a.waits[len(a.waits)/2].Round(time.Microsecond), a.waits[len(a.waits)*99/100].Round(time.Microsecond))
	}
}
