package idem_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store/memstore"
)

// provider stands for a payment provider that takes an idempotency key and
// a fence with each charge: it keeps one charge per key, and refuses a
// request whose fence is lower than one it has seen for the key (a stale
// owner's late retry).
type provider struct {
	mu      sync.Mutex
	charges map[string]string // idempotency key → charge id
	fences  map[string]uint64 // idempotency key → highest fence seen
}

func newProvider() *provider {
	return &provider{charges: map[string]string{}, fences: map[string]uint64{}}
}

func (p *provider) charge(key string, fence uint64, cents int) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if fence < p.fences[key] {
		return "", fmt.Errorf("stale fence %d for %s", fence, key)
	}
	p.fences[key] = fence
	if id, ok := p.charges[key]; ok {
		return id, nil // the provider's own idempotency: the same charge
	}
	id := fmt.Sprintf("ch-%d", len(p.charges)+1)
	p.charges[key] = id
	return id, nil
}

func (p *provider) lookup(key string) (string, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	id, ok := p.charges[key]
	return id, ok
}

// Passing the claim downstream: the provider gets the key as its own
// idempotency key and the fence, so that even a second run of the function
// (after a crash between the charge and the stored result) charges once.
func ExampleClaimFrom() {
	ctx := context.Background()
	rt := idem.Must(idem.New(idem.Options{}))
	defer rt.Close(ctx)
	psp := newProvider()

	pay := func(ctx context.Context) (string, error) {
		c, _ := idem.ClaimFrom(ctx)
		return psp.charge(c.Key, c.Fence, 4200)
	}
	for range 3 {
		id, err := idem.Do(ctx, rt, "order-1", pay)
		fmt.Println(id, err)
	}
	fmt.Println("charges:", len(psp.charges))
	// Output:
	// ch-1 <nil>
	// ch-1 <nil>
	// ch-1 <nil>
	// charges: 1
}

// Reconciling after a takeover: an owner charged, then stopped before its
// result was stored (here it hangs; in production, its process died). Its
// lease ends, the next caller takes the key over, sees Takeover, and looks
// for the earlier charge before making one.
func ExampleClaimFrom_takeover() {
	ctx := context.Background()
	st := memstore.New(memstore.Options{})
	first := idem.Must(idem.New(idem.Options{Store: st}))
	second := idem.Must(idem.New(idem.Options{Store: st}))
	psp := newProvider()

	hang := make(chan struct{})
	charged := make(chan struct{})
	go func() {
		_, _ = idem.Do(ctx, first, "order-1", func(ctx context.Context) (string, error) {
			c, _ := idem.ClaimFrom(ctx)
			id, err := psp.charge(c.Key, c.Fence, 4200)
			close(charged)
			<-hang // never returns in time
			return id, err
		}, idem.WithLease(100*time.Millisecond), idem.WithoutRenewal())
	}()
	<-charged

	id, err := idem.Do(ctx, second, "order-1", func(ctx context.Context) (string, error) {
		c, _ := idem.ClaimFrom(ctx)
		if c.Takeover {
			fmt.Println("took over from an owner whose lease ended")
			if id, ok := psp.lookup(c.Key); ok {
				return id, nil // it charged: keep its charge
			}
		}
		return psp.charge(c.Key, c.Fence, 4200)
	})
	fmt.Println(id, err)
	fmt.Println("charges:", len(psp.charges))

	close(hang)
	_ = second.Close(ctx)
	_ = first.Close(ctx)
	// Output:
	// took over from an owner whose lease ended
	// ch-1 <nil>
	// charges: 1
}
