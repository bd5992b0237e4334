package idem_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

type Receipt struct {
	ID     string
	Amount int
}

// A storm of duplicate requests for one key runs the side effect once; a
// later retry gets the stored receipt back. (The README's quickstart.)
func Example() {
	ctx := context.Background()
	rt, err := idem.New(idem.Options{}) // in-memory store, defaults
	if err != nil {
		panic(err)
	}
	defer rt.Close(ctx)

	var charges atomic.Int32
	charge := func(ctx context.Context) (Receipt, error) {
		charges.Add(1)
		time.Sleep(20 * time.Millisecond) // the payment gateway
		return Receipt{ID: "rcpt-1", Amount: 4200}, nil
	}

	var wg sync.WaitGroup
	for range 100 { // 100 duplicates of one request, at once
		wg.Go(func() {
			_, _ = idem.Do(ctx, rt, "charge:order-1", charge, idem.WithSettle(3*time.Second))
		})
	}
	wg.Wait()

	var how idem.Outcome
	r, err := idem.Do(ctx, rt, "charge:order-1", charge, idem.WithOutcome(&how))
	fmt.Println(r.ID, r.Amount, err, how)
	fmt.Println("charges:", charges.Load())
	// Output:
	// rcpt-1 4200 <nil> replayed
	// charges: 1
}

func ExampleNew() {
	rt, err := idem.New(idem.Options{
		Policy: idem.Policy{
			Lease: 30 * time.Second, // a crashed owner's key is taken over after this
			TTL:   time.Hour,        // results are replayed for this long
		},
	})
	if err != nil {
		panic(err)
	}
	defer rt.Close(context.Background())
	fmt.Println(rt.Stats().Shards > 0)

	_, err = idem.New(idem.Options{Policy: idem.Policy{Lease: -time.Second}})
	fmt.Println(errors.Is(err, idem.ErrInvalidArgument))
	// Output:
	// true
	// true
}

func ExampleMust() {
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(context.Background())
	v, err := idem.Do(context.Background(), rt, "k", func(context.Context) (int, error) { return 7, nil })
	fmt.Println(v, err)
	// Output: 7 <nil>
}

func ExampleDo() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)

	create := func(ctx context.Context) (string, error) { return "order-1234", nil }
	id, err := idem.Do(ctx, rt, "create-order:req-77", create, idem.WithTTL(24*time.Hour))
	fmt.Println(id, err)
	// The retry of the same request returns the same order, without creating one.
	id, err = idem.Do(ctx, rt, "create-order:req-77", func(ctx context.Context) (string, error) {
		return "a second order", nil
	})
	fmt.Println(id, err)
	// Output:
	// order-1234 <nil>
	// order-1234 <nil>
}

func ExampleWithOutcome() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	fn := func(context.Context) (int, error) { return 1, nil }
	for range 2 {
		var how idem.Outcome
		_, _ = idem.Do(ctx, rt, "k", fn, idem.WithOutcome(&how))
		fmt.Println(how)
	}
	// Output:
	// executed
	// replayed
}

func ExampleWithSettle() {
	ctx := context.Background()
	// A runtime whose calls fail fast by default.
	rt := idem.Must(idem.New(idem.Options{Policy: idem.Policy{FailFast: true}}))
	defer rt.Close(ctx)
	started, release := make(chan struct{}), make(chan struct{})
	go idem.Do(ctx, rt, "slow", func(context.Context) (int, error) {
		close(started)
		<-release
		return 1, nil
	})
	<-started
	// This call waits up to a minute for the run in flight, and gets its
	// result: its function does not run.
	dup := make(chan int)
	go func() {
		v, _ := idem.Do(ctx, rt, "slow", func(context.Context) (int, error) { return 2, nil }, idem.WithSettle(time.Minute))
		dup <- v
	}()
	close(release)
	fmt.Println(<-dup)
	// Output: 1
}

func ExampleWithFailFast() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	started, release := make(chan struct{}), make(chan struct{})
	go idem.Do(ctx, rt, "slow", func(context.Context) (int, error) {
		close(started)
		<-release
		return 1, nil
	})
	<-started
	// Fail fast instead of waiting for the run in flight (HTTP 409).
	_, err := idem.Do(ctx, rt, "slow", func(context.Context) (int, error) { return 2, nil }, idem.WithFailFast())
	var ce *idem.ConflictError
	fmt.Println(errors.As(err, &ce), ce.Key, ce.State)
	close(release)
	// Output: true slow in-progress
}

func ExampleWithFingerprint() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	pay := func(context.Context) (string, error) { return "paid 10 EUR", nil }
	_, _ = idem.Do(ctx, rt, "pay:k1", pay, idem.WithFingerprint([]byte("amount=10")))
	// The same key with another request body is refused, not replayed.
	_, err := idem.Do(ctx, rt, "pay:k1", pay, idem.WithFingerprint([]byte("amount=99")))
	fmt.Println(errors.Is(err, idem.ErrFingerprintMismatch))
	// Output: true
}

func ExampleWithTTL() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	_, err := idem.Do(ctx, rt, "k", func(context.Context) (int, error) { return 1, nil }, idem.WithTTL(time.Minute))
	fmt.Println(err)
	_, err = idem.Do(ctx, rt, "k2", func(context.Context) (int, error) { return 1, nil }, idem.WithTTL(0))
	fmt.Println(errors.Is(err, idem.ErrInvalidArgument))
	// Output:
	// <nil>
	// true
}

func ExampleWithLease() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	// A short lease: if this process dies mid-run, another takes the key
	// over after 5s. While fn runs, the lease is renewed every third of it.
	v, err := idem.Do(ctx, rt, "k", func(context.Context) (int, error) { return 1, nil }, idem.WithLease(5*time.Second))
	fmt.Println(v, err)
	// Output: 1 <nil>
}

type upperCodec struct{}

func (upperCodec) Marshal(v any) ([]byte, error)      { return []byte(fmt.Sprint(v)), nil }
func (upperCodec) Unmarshal(data []byte, v any) error { *(v.(*string)) = string(data); return nil }

func ExampleWithCodec() {
	ctx := context.Background()
	st := memstore.New(memstore.Options{})
	rt := idem.Must(idem.New(idem.Options{Store: st}))
	defer rt.Close(ctx)
	_, _ = idem.Do(ctx, rt, "k", func(context.Context) (string, error) { return "raw text", nil }, idem.WithCodec(upperCodec{}))
	rec, _ := st.Get(ctx, "k")
	fmt.Printf("%s\n", rec.Value)
	// Output: raw text
}

var ErrCardDeclined = errors.New("card declined")

func ExamplePermanent() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	calls := 0
	charge := func(context.Context) (Receipt, error) {
		calls++
		return Receipt{}, idem.Permanent(ErrCardDeclined) // a business outcome: keep it
	}
	for range 3 {
		_, err := idem.Do(ctx, rt, "charge:order-2", charge)
		fmt.Println(errors.Is(err, ErrCardDeclined), idem.IsPermanent(err))
	}
	fmt.Println("gateway calls:", calls)
	// Output:
	// true true
	// true true
	// true true
	// gateway calls: 1
}

func ExampleIsPermanent() {
	fmt.Println(idem.IsPermanent(idem.Permanent(ErrCardDeclined)))
	fmt.Println(idem.IsPermanent(fmt.Errorf("wrapped: %w", idem.Permanent(ErrCardDeclined))))
	fmt.Println(idem.IsPermanent(errors.New("connection reset")))
	// Output:
	// true
	// true
	// false
}

func ExampleWithClassifier() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	declined := func(err error) bool { return errors.Is(err, ErrCardDeclined) }
	calls := 0
	charge := func(context.Context) (int, error) { calls++; return 0, ErrCardDeclined }
	for range 2 {
		_, _ = idem.Do(ctx, rt, "charge:order-3", charge, idem.WithClassifier(declined))
	}
	fmt.Println("gateway calls:", calls)
	// Output: gateway calls: 1
}

func ExampleRuntime_Forget() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	n := 0
	count := func(context.Context) (int, error) { n++; return n, nil }
	a, _ := idem.Do(ctx, rt, "k", count)
	_ = rt.Forget(ctx, "k") // on purpose: the next call runs again
	b, _ := idem.Do(ctx, rt, "k", count)
	fmt.Println(a, b)
	// Output: 1 2
}

func ExampleRuntime_Close() {
	rt := idem.Must(idem.New(idem.Options{}))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	fmt.Println(rt.Close(ctx))
	_, err := idem.Do(ctx, rt, "k", func(context.Context) (int, error) { return 1, nil })
	fmt.Println(errors.Is(err, idem.ErrClosed))
	// Output:
	// <nil>
	// true
}

func ExampleRuntime_Stats() {
	rt := idem.Must(idem.New(idem.Options{Shards: 4}))
	defer rt.Close(context.Background())
	st := rt.Stats()
	fmt.Println(st.Shards, st.InFlight, st.Waiters)
	// Output: 4 0 0
}

// Two runtimes that share a store behave like two service instances: a
// result produced by one is replayed by the other.
func ExampleOptions_sharedStore() {
	ctx := context.Background()
	shared := memstore.New(memstore.Options{})
	a := idem.Must(idem.New(idem.Options{Store: shared}))
	b := idem.Must(idem.New(idem.Options{Store: shared}))
	defer a.Close(ctx)
	defer b.Close(ctx)
	_, _ = idem.Do(ctx, a, "k", func(context.Context) (string, error) { return "from a", nil })
	v, _ := idem.Do(ctx, b, "k", func(context.Context) (string, error) { return "from b", nil })
	fmt.Println(v)
	// Output: from a
}

func ExampleReplayedError() {
	ctx := context.Background()
	shared := memstore.New(memstore.Options{})
	a := idem.Must(idem.New(idem.Options{Store: shared}))
	b := idem.Must(idem.New(idem.Options{Store: shared}))
	defer a.Close(ctx)
	defer b.Close(ctx)
	decline := func(context.Context) (int, error) { return 0, idem.Permanent(ErrCardDeclined) }
	_, _ = idem.Do(ctx, a, "k", decline)
	// Another instance sees the stored message, not the original value.
	_, err := idem.Do(ctx, b, "k", decline)
	var re *idem.ReplayedError
	fmt.Println(errors.As(err, &re), re.Message)
	// Output: true card declined
}

func ExampleConflictError() {
	err := error(&idem.ConflictError{Key: store.BuildKey("order-1", store.Scope{Namespace: "tenant-a", Version: "v2"}), State: "in-progress", LeaseLeft: 1500 * time.Millisecond})
	fmt.Println(err)
	fmt.Println(errors.Is(err, idem.ErrConflict))
	// Output:
	// idem: key "order-1" (namespace "tenant-a", version "v2") is in-progress (lease left 1.5s)
	// true
}
