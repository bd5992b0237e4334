package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store/memstore"
)

func TestClaimFromInsideAndOutsideFn(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	ctx := context.Background()
	if _, ok := idem.ClaimFrom(ctx); ok {
		t.Fatal("a claim outside any function")
	}
	if _, ok := idem.ClaimFrom(nil); ok { //nolint:staticcheck // nil is what a careless caller passes
		t.Fatal("a claim from a nil context")
	}
	var outer, derived, inner idem.Claim
	var okOuter, okDerived, okInner bool
	_, err := idem.Do(ctx, rt, "outer", func(ctx context.Context) (string, error) {
		outer, okOuter = idem.ClaimFrom(ctx)
		dctx, cancel := context.WithTimeout(context.WithValue(ctx, struct{}{}, 1), time.Minute)
		defer cancel()
		derived, okDerived = idem.ClaimFrom(dctx)
		return idem.Do(dctx, rt, "inner", func(ctx context.Context) (string, error) {
			inner, okInner = idem.ClaimFrom(ctx)
			return "v", nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	if !okOuter || outer.Key != "outer" || outer.Fence == 0 || outer.Attempt != 1 || outer.Takeover {
		t.Fatalf("outer claim = %+v (%v), want key outer, a fence, attempt 1, no takeover", outer, okOuter)
	}
	if !okDerived || derived != outer {
		t.Fatalf("a derived context's claim = %+v, want the function's %+v", derived, outer)
	}
	if !okInner || inner.Key != "inner" {
		t.Fatalf("nested call's claim = %+v, want its own key", inner)
	}
}

// A transient failure releases the key: the next claim starts a new record
// (attempt 1) with a higher fence.
func TestClaimAfterARelease(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	ctx := context.Background()
	var first, second idem.Claim
	_, err := idem.Do(ctx, rt, "k", func(ctx context.Context) (int, error) {
		first, _ = idem.ClaimFrom(ctx)
		return 0, errors.New("transient")
	})
	if err == nil {
		t.Fatal("no error")
	}
	if _, err := idem.Do(ctx, rt, "k", func(ctx context.Context) (int, error) {
		second, _ = idem.ClaimFrom(ctx)
		return 1, nil
	}); err != nil {
		t.Fatal(err)
	}
	if second.Attempt != 1 || second.Takeover || second.Fence <= first.Fence {
		t.Fatalf("claims %+v then %+v: want attempt 1 again, no takeover, a higher fence", first, second)
	}
}

// A claim that takes the key from an owner whose lease ended says so.
func TestClaimAfterATakeover(t *testing.T) {
	st := memstore.New(memstore.Options{})
	a := idemtest.Runtime(t, idem.Options{Store: st})
	b := idemtest.Runtime(t, idem.Options{Store: st})
	ctx := context.Background()
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	started := make(chan idem.Claim, 1)
	go func() {
		_, _ = idem.Do(ctx, a, "k", func(ctx context.Context) (int, error) {
			c, _ := idem.ClaimFrom(ctx)
			started <- c
			<-hold
			return 0, nil
		}, idem.WithLease(50*time.Millisecond), idem.WithoutRenewal())
	}()
	first := idemtest.Recv(t, started)
	var c idem.Claim
	if _, err := idem.Do(ctx, b, "k", func(ctx context.Context) (int, error) {
		c, _ = idem.ClaimFrom(ctx)
		return 1, nil
	}); err != nil {
		t.Fatal(err)
	}
	if !c.Takeover || c.Attempt != 2 || c.Fence <= first.Fence {
		t.Fatalf("claims %+v then %+v: want a takeover at attempt 2 with a higher fence", first, c)
	}
}
