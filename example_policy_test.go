package idem_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemrt/idem"
)

// A runtime's policy, and a call that sets part of its own: the fields the
// call leaves zero are the runtime's.
func ExamplePolicy() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{Policy: idem.Policy{
		FailFast: true,      // duplicates do not wait
		TTL:      time.Hour, // results are kept for an hour
	}}))
	defer rt.Close(ctx)
	fn := func(context.Context) (string, error) { return "done", nil }
	ttl := func(key string) time.Duration {
		st, _ := rt.State(ctx, key)
		return st.ExpiresAt.Sub(st.CreatedAt)
	}

	_, _ = idem.Do(ctx, rt, "report:1", fn)
	fmt.Println("runtime's TTL:", ttl("report:1"))
	_, _ = idem.Do(ctx, rt, "report:2", fn, idem.WithPolicy(idem.Policy{TTL: 24 * time.Hour}))
	fmt.Println("call's TTL:", ttl("report:2"))

	// The call set no settle time: it fails fast, as the runtime says.
	started, release := make(chan struct{}), make(chan struct{})
	go idem.Do(ctx, rt, "report:3", func(context.Context) (string, error) {
		close(started)
		<-release
		return "slow", nil
	})
	<-started
	_, err := idem.Do(ctx, rt, "report:3", fn, idem.WithPolicy(idem.Policy{TTL: 24 * time.Hour}))
	fmt.Println("conflict:", errors.Is(err, idem.ErrConflict))
	close(release)
	// Output:
	// runtime's TTL: 1h0m0s
	// call's TTL: 24h0m0s
	// conflict: true
}

// How the layers combine: each zero field takes the next layer's.
func ExamplePolicy_Inherit() {
	call := idem.Policy{TTL: time.Hour}
	frontEnd := idem.Policy{Settle: 10 * time.Second, NoRenewal: true}
	runtime := idem.Policy{FailFast: true, Lease: 2 * time.Minute}

	p := call.Inherit(frontEnd).Inherit(runtime)
	fmt.Println(p.Settle, p.FailFast, p.Lease, p.NoRenewal, p.TTL)
	// Settle and FailFast are one choice: the front end's settle time
	// overrides the runtime's FailFast.
	// Output: 10s false 2m0s true 1h0m0s
}

func ExampleWithPolicy() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	errDeclined := errors.New("card declined")
	runs := 0
	charge := func(context.Context) (string, error) { runs++; return "", errDeclined }
	// One call's policy: a short lease, and declines kept like results.
	pol := idem.Policy{
		Lease:      10 * time.Second,
		Classifier: func(err error) bool { return errors.Is(err, errDeclined) },
	}
	for range 2 {
		_, err := idem.Do(ctx, rt, "charge:7", charge, idem.WithPolicy(pol))
		fmt.Println(err, idem.IsPermanent(err))
	}
	fmt.Println("runs:", runs)

	_, err := idem.Do(ctx, rt, "charge:8", charge, idem.WithPolicy(idem.Policy{Lease: -time.Second}))
	fmt.Println(errors.Is(err, idem.ErrInvalidArgument))
	// Output:
	// card declined true
	// card declined true
	// runs: 1
	// true
}
