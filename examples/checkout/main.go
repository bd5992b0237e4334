// Command checkout runs a two-step checkout flow (charge the card, then send
// a receipt) on idem's flow executor and shows what makes it safe to retry:
//
//  1. ten duplicate requests race: the card is charged once and every caller
//     gets the same receipt;
//  2. a process dies after charging, in the middle of sending the receipt;
//     the retry, once the dead process's lease has ended, replays the charge
//     (the card is not charged again) and sends the receipt.
//
// The crash is simulated in one process: the first instance's store
// connection is cut at the moment of the crash (it can neither renew its
// lease nor record anything, as if the process had died), and a second
// instance that shares the store takes over. Against Redis the same happens
// across real processes (see flows/crash_test.go).
//
//	go run ./examples/checkout
package main

import (
	"context"
	"errors"
	"fmt"
	"log"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/flows"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// Checkout is the state of one checkout.
type Checkout struct {
	Order   string
	Amount  int
	Charge  string
	Receipt string
}

var (
	charges atomic.Int32
	mails   atomic.Int32
)

// newFlow builds the flow; receiptHook runs at the start of the receipt step.
func newFlow(receiptHook func()) *flows.Flow[Checkout] {
	return flows.Must(flows.New("checkout",
		flows.Step("charge", func(_ context.Context, c Checkout) (Checkout, error) {
			n := charges.Add(1)
			time.Sleep(20 * time.Millisecond) // the payment gateway
			c.Charge = fmt.Sprintf("ch_%s_%d", c.Order, n)
			return c, nil
		}).Idempotent(func(c Checkout) string { return "charge:" + c.Order }, flows.StepOptions{}),
		flows.Step("receipt", func(_ context.Context, c Checkout) (Checkout, error) {
			receiptHook()
			mails.Add(1)
			c.Receipt = "receipt for " + c.Charge + " sent"
			return c, nil
		}).Idempotent(func(c Checkout) string { return "receipt:" + c.Order }, flows.StepOptions{}),
	))
}

func main() {
	ctx := context.Background()
	shared := memstore.New(memstore.Options{})
	raceDuplicates(ctx, shared)
	crashAndResume(ctx, shared)
}

// raceDuplicates runs ten duplicate requests for one order at once: the
// card is charged once and every caller gets the same checkout.
func raceDuplicates(ctx context.Context, shared store.Store) {
	fmt.Println("1. ten duplicate requests for order o-1, at once")
	rt := idem.Must(idem.New(idem.Options{Store: shared}))
	defer rt.Close(ctx)
	f := newFlow(func() {})
	var wg sync.WaitGroup
	results := make([]Checkout, 10)
	for i := range results {
		wg.Go(func() {
			var err error
			results[i], err = f.Run(ctx, rt, Checkout{Order: "o-1", Amount: 4200},
				flows.RunOptions[Checkout]{IdempotencyKey: "request-o-1", Namespace: "shop"})
			if err != nil {
				log.Fatal(err)
			}
		})
	}
	wg.Wait()
	same := true
	for _, r := range results {
		same = same && r == results[0]
	}
	fmt.Printf("   card charged %d time(s), %d receipt(s) sent; all ten got %q: %v\n",
		charges.Load(), mails.Load(), results[0].Charge, same)
}

// crashAndResume has instance A die between the charge and the receipt;
// instance B, on the same store, takes the run over once A's lease has
// ended, replays the charge and sends the receipt.
func crashAndResume(ctx context.Context, shared store.Store) {
	fmt.Println("2. instance A charges order o-2, then dies while sending the receipt")
	cut := &cuttable{Store: shared}
	rtA := idem.Must(idem.New(idem.Options{Store: cut, Policy: idem.Policy{Lease: time.Second}}))
	crashed := make(chan struct{})
	fa := newFlow(func() {
		cut.cut() // the process dies here: no renewal, nothing recorded
		close(crashed)
		select {} // and never comes back
	})
	go func() {
		_, _ = fa.Run(ctx, rtA, Checkout{Order: "o-2", Amount: 990},
			flows.RunOptions[Checkout]{IdempotencyKey: "request-o-2", Namespace: "shop", Policy: idem.Policy{Lease: time.Second}})
	}()
	<-crashed
	before := charges.Load()
	fmt.Printf("   charges so far: %d; the client retries on instance B\n", before)

	rtB := idem.Must(idem.New(idem.Options{Store: shared, Policy: idem.Policy{Lease: time.Second}}))
	defer rtB.Close(ctx)
	start := time.Now()
	out, err := newFlow(func() {}).Run(ctx, rtB, Checkout{Order: "o-2", Amount: 990},
		flows.RunOptions[Checkout]{IdempotencyKey: "request-o-2", Namespace: "shop", Policy: idem.Policy{Lease: time.Second, Settle: 10 * time.Second}})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("   B resumed after %v (A's lease): %s\n", time.Since(start).Round(100*time.Millisecond), out.Receipt)
	fmt.Printf("   card charged %d more time(s) on the retry\n", charges.Load()-before)
	if charges.Load() != before {
		log.Fatal("the card was charged again")
	}
}

// cuttable is a store connection that can be cut: after cut, every call
// that claims or changes a key (Claim, Complete, Release, Renew) fails, as
// it would for a process that is gone.
type cuttable struct {
	store.Store
	dead atomic.Bool
}

var errGone = errors.New("process gone")

func (c *cuttable) cut() { c.dead.Store(true) }

func (c *cuttable) Claim(ctx context.Context, key string, req store.ClaimRequest) (store.ClaimResult, error) {
	if c.dead.Load() {
		return store.ClaimResult{}, errGone
	}
	return c.Store.Claim(ctx, key, req)
}

func (c *cuttable) Complete(ctx context.Context, key string, tok store.Token, rec store.Record, ttl time.Duration) (store.Record, error) {
	if c.dead.Load() {
		return store.Record{}, errGone
	}
	return c.Store.Complete(ctx, key, tok, rec, ttl)
}

func (c *cuttable) Release(ctx context.Context, key string, tok store.Token) error {
	if c.dead.Load() {
		return errGone
	}
	return c.Store.Release(ctx, key, tok)
}

func (c *cuttable) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	if c.dead.Load() {
		return errGone
	}
	return c.Store.Renew(ctx, key, tok, lease)
}
