package flows_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/flows"
)

// Payment is the state of a checkout: charge the card, then send a receipt.
type Payment struct {
	Order   string
	Amount  int
	Charge  string // the gateway's charge id
	Receipt bool
}

// The whole checkout scenario: ten duplicate requests race (one runs, the
// others wait and get its output), a declined card is replayed to a retry
// without calling the gateway, and a receipt that failed transiently is
// retried without charging twice.
func Example_checkout() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)

	var charges, mails atomic.Int32
	mailDown := atomic.Bool{}
	errDeclined := errors.New("card declined")
	checkout := flows.Must(flows.New("checkout",
		flows.Step("charge", func(_ context.Context, p Payment) (Payment, error) {
			charges.Add(1)
			if p.Amount > 1000 {
				return p, idem.Permanent(errDeclined)
			}
			p.Charge = "ch_" + p.Order
			return p, nil
		}).Idempotent(func(p Payment) string { return "charge:" + p.Order }, flows.StepOptions{}),
		flows.Step("receipt", func(_ context.Context, p Payment) (Payment, error) {
			mails.Add(1)
			if mailDown.Load() {
				return p, errors.New("smtp: 421 try again later")
			}
			p.Receipt = true
			return p, nil
		}).Idempotent(func(p Payment) string { return "receipt:" + p.Order }, flows.StepOptions{}),
	))
	run := func(req string, p Payment) (Payment, error) {
		return checkout.Run(ctx, rt, p, flows.RunOptions[Payment]{IdempotencyKey: req, Namespace: "shop-1"})
	}

	// Ten copies of one request at once.
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { _, _ = run("req-1", Payment{Order: "o-1", Amount: 250}) })
	}
	wg.Wait()
	p, err := run("req-1", Payment{Order: "o-1", Amount: 250})
	fmt.Println(p.Charge, p.Receipt, err, "| charges:", charges.Load(), "mails:", mails.Load())

	// A declined card, retried by the client: stored, not charged again.
	for range 2 {
		_, err = run("req-2", Payment{Order: "o-2", Amount: 5000})
		fmt.Println(errors.Is(err, errDeclined), idem.IsPermanent(err))
	}
	fmt.Println("charges:", charges.Load())

	// The mail server is down: the receipt fails, the retry sends it
	// without charging again.
	mailDown.Store(true)
	_, err = run("req-3", Payment{Order: "o-3", Amount: 90})
	fmt.Println(err)
	mailDown.Store(false)
	p, err = run("req-3", Payment{Order: "o-3", Amount: 90})
	fmt.Println(p.Charge, p.Receipt, err, "| charges:", charges.Load(), "mails:", mails.Load())
	// Output:
	// ch_o-1 true <nil> | charges: 1 mails: 1
	// true true
	// true true
	// charges: 2
	// flows: checkout: step "receipt": smtp: 421 try again later
	// ch_o-3 true <nil> | charges: 3 mails: 3
}
