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

	var charges atomic.Int32
	var settled atomic.Int64 // when the charge returned, in Unix nanoseconds
	charge := func(context.Context) (Receipt, error) {
		charges.Add(1)
		time.Sleep(50 * time.Millisecond) // the payment gateway
		settled.Store(time.Now().UnixNano())
		return Receipt{ID: "rcpt-8812", Amount: 4200}, nil
	}

	const duplicates = 1000
	fmt.Printf("%d concurrent requests for key charge:order-1 ...\n", duplicates)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		outcomes = map[idem.Outcome]int{}
		waits    []time.Duration // how long after the charge each duplicate got its answer
		receipts = map[Receipt]int{}
	)
	for range duplicates {
		wg.Go(func() {
			var how idem.Outcome
			r, err := idem.Do(ctx, rt, "charge:order-1", charge,
				idem.WithSettle(3*time.Second), idem.WithOutcome(&how))
			done := time.Now().UnixNano()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				log.Printf("request failed: %v", err)
				return
			}
			outcomes[how]++
			receipts[r]++
			if how == idem.Joined {
				waits = append(waits, time.Duration(done-settled.Load()))
			}
		})
	}
	wg.Wait()

	fmt.Printf("card charged %d time(s)\n", charges.Load())
	fmt.Printf("outcomes: executed %d, joined %d, replayed %d\n",
		outcomes[idem.Executed], outcomes[idem.Joined], outcomes[idem.Replayed])
	for r, n := range receipts {
		fmt.Printf("receipt %s for %d cents, returned to %d callers\n", r.ID, r.Amount, n)
	}
	if len(waits) > 0 {
		sort.Slice(waits, func(i, j int) bool { return waits[i] < waits[j] })
		fmt.Printf("duplicates released after the charge returned: p50 %v, p99 %v\n",
			waits[len(waits)/2].Round(time.Microsecond), waits[len(waits)*99/100].Round(time.Microsecond))
	}

	var how idem.Outcome
	r, err := idem.Do(ctx, rt, "charge:order-1", charge, idem.WithOutcome(&how))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("a retry later: %s, receipt %s; card charged %d time(s) in all\n", how, r.ID, charges.Load())
	if charges.Load() != 1 {
		log.Fatal("the side effect ran more than once")
	}
}
