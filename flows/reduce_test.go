package flows_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/flows"
	"github.com/idemrt/idem/internal/idemtest"
)

// Reduce steps: one execution per item, with the state stored after each.

// Reduce over 100 items with a failure at item 57: the retry runs items
// 57-99 only.
func TestReduceRetryRunsRemainder(t *testing.T) {
	eachStore(t, func(t *testing.T, rt *idem.Runtime) {
		runs := make([]int, 100)
		failAt := 57
		f := flows.Must(flows.New("refunds",
			flows.Reduce("refund", func(o Order) []string { return o.Items },
				func(_ context.Context, o Order, item string) (Order, error) {
					var i int
					fmt.Sscanf(item, "item-%d", &i)
					runs[i]++
					if i == failAt {
						return o, errGateway
					}
					o.Refunded = append(o.Refunded, item)
					return o, nil
				}).Idempotent(func(o Order, item string) string { return "refund:" + o.Invoice + ":" + item }, flows.StepOptions{}),
		))
		in := Order{Invoice: "inv-r"}
		for i := range 100 {
			in.Items = append(in.Items, fmt.Sprint("item-", i))
		}
		_, err := f.Run(bg, rt, in, flows.RunOptions[Order]{IdempotencyKey: "refund-all"})
		var se *flows.StepError
		if !errors.As(err, &se) || se.Item != 57 || se.Step != "refund" {
			t.Fatalf("first run: %v", err)
		}
		failAt = -1
		out, err := f.Run(bg, rt, in, flows.RunOptions[Order]{IdempotencyKey: "refund-all"})
		if err != nil || len(out.Refunded) != 100 {
			t.Fatalf("retry: %d refunded, %v", len(out.Refunded), err)
		}
		for i, n := range runs {
			want := 1
			if i == 57 {
				want = 2
			}
			if n != want {
				t.Fatalf("item %d ran %d times, want %d", i, n, want)
			}
		}
	})
}

// A reduce step stores the whole state after each item. An item whose key
// repeats an earlier one (here the third repeats the first) does not roll
// the state back to the snapshot stored for that key: item 1's effect on
// the state, whose side effect happened, is kept.
func TestReduceRepeatedKeyKeepsState(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	f := flows.Must(flows.New("refunds",
		flows.Reduce("refund", func(o Order) []string { return o.Items },
			func(_ context.Context, o Order, item string) (Order, error) {
				o.Refunded = append(o.Refunded, item)
				return o, nil
			}).Idempotent(func(o Order, item string) string { return "refund:" + o.Invoice + ":" + item }, flows.StepOptions{}),
	))
	out, err := f.Run(bg, rt, Order{Invoice: "i", Items: []string{"a", "b", "a"}}, flows.RunOptions[Order]{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, r := range out.Refunded {
		found = found || r == "b"
	}
	if !found {
		t.Fatalf("state after the reduce: Refunded=%v; item b was refunded but the state lost it", out.Refunded)
	}
}
