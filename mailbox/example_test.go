package mailbox_test

import (
	"fmt"

	"github.com/idemrt/idem/mailbox"
)

func ExampleNewWorker() {
	w := mailbox.NewWorker()
	defer w.Stop()

	// Jobs execute one after another on the worker's goroutine, in the
	// order they were submitted.
	done := make(chan struct{})
	for i := 1; i <= 3; i++ {
		w.Submit(func() {
			fmt.Println("run", i)
			if i == 3 {
				close(done)
			}
		})
	}
	<-done
	// Output:
	// run 1
	// run 2
	// run 3
}

func ExampleNewCommitter() {
	var inflight []string
	c := mailbox.NewCommitter(2, func(batch []string) {
		fmt.Println("flush", batch)
		inflight = batch
	})

	c.Add("a") // nothing in flight: goes at once
	c.Add("b") // these wait for the batch in flight
	c.Add("c")
	c.Add("d")

	for c.InFlight() {
		c.Done(inflight) // the store answered; send what queued up
	}
	// Output:
	// flush [a]
	// flush [b c]
	// flush [d]
}

func ExampleWorker_Submit() {
	w := mailbox.NewWorker()

	done := make(chan struct{})
	ok := w.Submit(func() {
		fmt.Println("store batch written")
		close(done)
	})
	<-done
	fmt.Println("accepted:", ok)

	w.Stop()
	fmt.Println("accepted after Stop:", w.Submit(func() {}))
	// Output:
	// store batch written
	// accepted: true
	// accepted after Stop: false
}

func ExampleGate() {
	var g mailbox.Gate
	g.SetLimit(2)

	fmt.Println(g.Enter(), g.Enter(), g.Enter())
	g.Leave()
	fmt.Println(g.Enter(), g.Pending())
	// Output:
	// true true false
	// true 2
}
