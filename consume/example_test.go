package consume_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
)

// A message delivered three times (a duplicate publish and a redelivery)
// ships its order once; the other deliveries replay the result and are
// acknowledged too.
func ExampleHandle() {
	ctx := context.Background()
	rt, _ := idem.New(idem.Options{}) // in-memory store
	defer rt.Close(ctx)
	c, _ := consume.New(consume.Options{Runtime: rt})

	shipped := 0
	ship := func(context.Context) (string, error) {
		shipped++
		return "parcel-1", nil
	}
	for attempt := 1; attempt <= 3; attempt++ {
		d := consume.Delivery{Scope: "ORDERS/shipper", Key: "msg-42", Attempt: attempt}
		parcel, v := consume.Handle(ctx, c, d, ship)
		fmt.Println(v.Decision, v.Outcome, parcel)
	}
	fmt.Println("shipped:", shipped)
	// Output:
	// ack executed parcel-1
	// ack replayed parcel-1
	// ack replayed parcel-1
	// shipped: 1
}

// Transient errors are retried with a delay that grows with the attempt;
// a permanent error gives the message up, and a duplicate of it too.
func ExampleNew() {
	ctx := context.Background()
	rt, _ := idem.New(idem.Options{})
	defer rt.Close(ctx)
	c, err := consume.New(consume.Options{
		Runtime:  rt,
		MinDelay: 200 * time.Millisecond,
		MaxDelay: time.Second,
	})
	if err != nil {
		panic(err)
	}
	flaky := func(context.Context) (int, error) { return 0, errors.New("warehouse unreachable") }
	for attempt := 1; attempt <= 4; attempt++ {
		_, v := consume.Handle(ctx, c, consume.Delivery{Scope: "s", Key: "m1", Attempt: attempt}, flaky)
		fmt.Println(v.Decision, v.Delay, v.Err)
	}
	declined := func(context.Context) (int, error) { return 0, idem.Permanent(errors.New("card declined")) }
	for range 2 {
		_, v := consume.Handle(ctx, c, consume.Delivery{Scope: "s", Key: "m2", Attempt: 1}, declined)
		fmt.Println(v.Decision, v.Outcome, v.Err)
	}
	// Output:
	// retry 200ms warehouse unreachable
	// retry 400ms warehouse unreachable
	// retry 800ms warehouse unreachable
	// retry 1s warehouse unreachable
	// term executed card declined
	// term replayed card declined
}

// The idem key of a message: what Get, State and Forget take.
func ExampleKey() {
	k, _ := consume.Key("ORDERS:shipper", "msg-42")
	fmt.Println(k)
	_, err := consume.Key("ORDERS:shipper", "")
	fmt.Println(err)
	// Output:
	// consume:ORDERS%3Ashipper:msg-42
	// consume: the message has no key (no message id and no key function)
}

func ExampleDecision_String() {
	fmt.Println(consume.Ack, consume.Retry, consume.Term, consume.Decision(0))
	// Output: ack retry term none
}

func ExampleVerdict_Replayed() {
	ctx := context.Background()
	rt, _ := idem.New(idem.Options{})
	defer rt.Close(ctx)
	c, _ := consume.New(consume.Options{Runtime: rt})
	d := consume.Delivery{Scope: "s", Key: "m", Attempt: 1}
	for range 2 {
		_, v := consume.Handle(ctx, c, d, func(context.Context) (bool, error) { return true, nil })
		fmt.Println(v.Replayed())
	}
	// Output:
	// false
	// true
}
