package storetest

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// The check finds the bugs it is there for: each broken store below fails
// it within a few seeds, and the failure names the seed and a visualisation.

// broken wraps a store with one bug.
type broken struct {
	store.Store
	bug string
	mu  sync.Mutex
	n   int
	got map[string]store.Record // staleGet's cache
}

func (b *broken) every(k int) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.n++
	return b.n%k == 0
}

func (b *broken) Complete(ctx context.Context, key string, tok store.Token, rec store.Record, ttl time.Duration) (store.Record, error) {
	if b.bug == "lostComplete" && b.every(3) {
		return store.Record{Value: rec.Value, Failed: rec.Failed, Error: rec.Error, Fingerprint: rec.Fingerprint, Token: tok,
			CreatedAt: time.Unix(0, 0), ExpiresAt: time.Unix(0, 0).Add(ttl)}, nil
	}
	return b.Store.Complete(ctx, key, tok, rec, ttl)
}

func (b *broken) Release(ctx context.Context, key string, tok store.Token) error {
	err := b.Store.Release(ctx, key, tok)
	if b.bug == "releaseLies" && err == nil && b.every(2) {
		return store.ErrLeaseLost // released, but says otherwise
	}
	return err
}

func (b *broken) Get(ctx context.Context, key string) (store.Record, error) {
	if b.bug == "staleGet" {
		b.mu.Lock()
		rec, ok := b.got[key]
		b.mu.Unlock()
		if ok {
			return rec, nil
		}
	}
	rec, err := b.Store.Get(ctx, key)
	if err == nil && b.bug == "staleGet" {
		b.mu.Lock()
		b.got[key] = rec
		b.mu.Unlock()
	}
	return rec, err
}

func (b *broken) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	if b.bug == "renewIgnored" {
		if _, err := b.Store.Claim(ctx, key, store.ClaimRequest{Owner: tok.Owner, Lease: lease, TTL: lease}); err != nil {
			return err
		}
		return nil // says renewed, renews nothing (and may even claim)
	}
	return b.Store.Renew(ctx, key, tok, lease)
}

func (b *broken) Claim(ctx context.Context, key string, req store.ClaimRequest) (store.ClaimResult, error) {
	res, err := b.Store.Claim(ctx, key, req)
	if b.bug == "oldFence" && err == nil && res.Status == store.InProgress && res.Token.Fence > 1 {
		res.Token.Fence-- // reports a fence the holder does not have
	}
	if b.bug == "noTakeoverFlag" {
		res.Takeover = false
	}
	if b.bug == "attemptNotCounted" && res.Takeover {
		res.Attempt = 1 // a takeover counted as a new record
	}
	if b.bug == "fenceRestarts" && err == nil && res.Status == store.Claimed && res.Token.Fence > 1 && !res.Takeover && b.every(2) {
		// A claim that starts a record answers a smaller fence than the
		// store holds: one of fence 1 does not know the key's earlier records.
		res.Token.Fence = 1
	}
	return res, err
}

// catcher is a testing.TB that records failures instead of failing.
type catcher struct {
	testing.TB
	mu   sync.Mutex
	msgs []string
}

func (c *catcher) Errorf(format string, args ...any) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, fmt.Sprintf(format, args...))
}

func (c *catcher) Fatalf(format string, args ...any) {
	c.Errorf(format, args...)
	runtime.Goexit()
}

func (c *catcher) Failed() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.msgs) > 0
}

func TestLinearizableFindsBugs(t *testing.T) {
	for _, bug := range []string{"lostComplete", "releaseLies", "staleGet", "oldFence", "renewIgnored", "noTakeoverFlag",
		"attemptNotCounted", "fenceRestarts"} {
		t.Run(bug, func(t *testing.T) {
			var mu sync.Mutex
			clocks := map[testing.TB]*clock.Fake{}
			h := Harness{
				New: func(t testing.TB) store.Store {
					c := clock.NewFake(time.Unix(1e9, 0))
					mu.Lock()
					clocks[t] = c
					mu.Unlock()
					s := memstore.New(memstore.Options{Clock: c})
					t.Cleanup(func() { s.Close() })
					return &broken{Store: s, bug: bug, got: map[string]store.Record{}}
				},
				Advance: func(t testing.TB, d time.Duration) {
					mu.Lock()
					c := clocks[t]
					mu.Unlock()
					c.Advance(d)
				},
				Unit:  time.Second,
				Exact: true,
			}
			o := LinearOptions{Clients: 4, Keys: 2, Ops: 40, Ticks: 20, vizDir: t.TempDir()}
			o.defaults()
			for seed := uint64(1); seed <= 20; seed++ {
				c := &catcher{TB: t}
				done := make(chan struct{})
				go func() {
					defer close(done)
					linearRun(c, h, o, seed)
				}()
				<-done
				if c.Failed() {
					msg := strings.Join(c.msgs, "\n")
					if !strings.Contains(msg, "not linearizable") || !strings.Contains(msg, "Visualisation: ") {
						t.Fatalf("seed %d failed without a linearizability report:\n%s", seed, msg)
					}
					t.Logf("found at seed %d", seed)
					return
				}
			}
			t.Fatal("no seed in 1..20 found the bug")
		})
	}
}
