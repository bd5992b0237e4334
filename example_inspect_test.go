package idem_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idemrt/idem"
)

func ExampleGet() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)

	_, err := idem.Get[Receipt](ctx, rt, "charge:order-9")
	fmt.Println(errors.Is(err, idem.ErrNotFound))

	_, _ = idem.Do(ctx, rt, "charge:order-9", func(context.Context) (Receipt, error) {
		return Receipt{ID: "rcpt-9", Amount: 1200}, nil
	})
	r, err := idem.Get[Receipt](ctx, rt, "charge:order-9") // nothing runs
	fmt.Println(r.ID, r.Amount, err)
	// Output:
	// true
	// rcpt-9 1200 <nil>
}

func ExampleRuntime_State() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)

	started, finish := make(chan struct{}), make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = idem.Do(ctx, rt, "export:2026-12", func(context.Context) (string, error) {
			close(started)
			<-finish
			return "export.csv", nil
		})
	}()
	<-started
	st, _ := rt.State(ctx, "export:2026-12")
	fmt.Println(st.Status, st.HeldHere, st.LeaseLeft > 0)
	close(finish)
	<-done

	st, _ = rt.State(ctx, "export:2026-12")
	fmt.Println(st.Status, st.Size, st.ExpiresAt.Sub(st.CreatedAt))
	// Output:
	// in-progress true true
	// completed 12 24h0m0s
}

func ExampleNewReplayedError() {
	// What a front end keeps of a permanent error inside its own record,
	// and how it rebuilds it.
	re := idem.NewReplayedError("k", fmt.Errorf("refund: %w", errors.New("window closed")))
	kept := &idem.ReplayedError{Key: "k", Message: re.Message, Code: re.Code, Detail: re.Detail}
	fmt.Println(kept, idem.IsPermanent(kept))
	// Output: refund: window closed true
}
