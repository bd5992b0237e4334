package memstore_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// Random claims, renewals, completions, releases and time on a full
// shard. A claim whose lease is live (by what the store told its holder) is
// never evicted nor taken over, and its holder's Renew/Complete succeed;
// once every key is settled and time has passed every TTL, operations on
// other keys remove every record.
func TestRandomLiveClaimsNeverEvicted(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { randomLiveClaims(t, seed) })
	}
}

type liveHolder struct {
	tok        store.Token
	leaseUntil time.Time
	held       bool
}

func randomLiveClaims(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 7))
	c := clock.NewFake(epoch)
	s := memstore.New(memstore.Options{Clock: c, MaxRecords: 64 * 3, WhenFull: memstore.EvictWhenFull}) // three records per shard
	ctx := context.Background()
	keys := sameShard(6)
	leases := []time.Duration{time.Second, 3 * time.Second, 10 * time.Second}
	ttls := []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, time.Minute}
	model := map[string]*liveHolder{}
	for _, k := range keys {
		model[k] = &liveHolder{}
	}
	owner := 0
	var log []string
	fail := func(format string, a ...any) {
		t.Helper()
		for _, l := range log {
			t.Log(l)
		}
		t.Fatalf(format, a...)
	}
	for step := 0; step < 400; step++ {
		k := keys[rng.IntN(len(keys))]
		h := model[k]
		now := c.Now()
		live := h.held && now.Before(h.leaseUntil)
		switch rng.IntN(6) {
		case 0, 1: // claim
			owner++
			lease, ttl := leases[rng.IntN(len(leases))], ttls[rng.IntN(len(ttls))]
			res, err := s.Claim(ctx, k, store.ClaimRequest{Owner: fmt.Sprint("o", owner), Lease: lease, TTL: ttl})
			log = append(log, fmt.Sprintf("t=%v claim %s lease=%v ttl=%v -> %v %v err=%v", now.Sub(epoch), k, lease, ttl, res.Status, res.Token, err))
			if err != nil {
				fail("claim: %v", err)
			}
			if res.Status == store.Claimed {
				if live {
					fail("key %s claimed by a second owner while the holder's lease runs until %v (now %v, evicted %d)", k, h.leaseUntil, now, s.Evicted())
				}
				*h = liveHolder{tok: res.Token, leaseUntil: now.Add(lease), held: true}
			}
		case 2: // renew
			if !h.held {
				continue
			}
			lease := leases[rng.IntN(len(leases))]
			err := s.Renew(ctx, k, h.tok, lease)
			log = append(log, fmt.Sprintf("t=%v renew %s %v lease=%v -> %v", now.Sub(epoch), k, h.tok, lease, err))
			if err != nil {
				if live {
					fail("renew by the live holder of %s: %v", k, err)
				}
				h.held = false
				continue
			}
			if nu := now.Add(lease); nu.After(h.leaseUntil) || true {
				h.leaseUntil = nu
			}
		case 3: // complete
			if !h.held {
				continue
			}
			ttl := ttls[rng.IntN(len(ttls))]
			_, err := s.Complete(ctx, k, h.tok, store.Record{Value: []byte("v")}, ttl)
			log = append(log, fmt.Sprintf("t=%v complete %s %v -> %v", now.Sub(epoch), k, h.tok, err))
			if err != nil && live {
				fail("complete by the live holder of %s: %v", k, err)
			}
			h.held = false
		case 4: // release
			if !h.held {
				continue
			}
			err := s.Release(ctx, k, h.tok)
			log = append(log, fmt.Sprintf("t=%v release %s -> %v", now.Sub(epoch), k, err))
			if err != nil && live {
				fail("release by the live holder of %s: %v", k, err)
			}
			h.held = false
		case 5:
			d := time.Duration(rng.IntN(4000)) * time.Millisecond
			c.Advance(d)
			log = append(log, fmt.Sprintf("advance %v", d))
		}
	}
	// Settle everything, then let every TTL pass: records must go.
	for _, k := range keys {
		if h := model[k]; h.held {
			_ = s.Release(ctx, k, h.tok)
		}
	}
	// Keys still held by an owner the model lost track of: forget nothing,
	// only count what is removable.
	c.Advance(time.Hour)
	other := sameShard(20)[10:]
	for i := 0; i < 200; i++ {
		_, _ = s.Get(ctx, other[i%len(other)])
	}
	n := 0
	for _, k := range keys {
		res, err := s.Claim(ctx, k, store.ClaimRequest{Owner: "probe", Lease: time.Second, TTL: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status == store.Claimed && res.Takeover {
			n++ // an abandoned claim of an owner we dropped: allowed to stay
		}
		_ = s.Release(ctx, k, res.Token)
	}
	_ = n
	if l := s.Len(); l != 0 {
		fail("after every key settled and an hour passed, %d records remain", l)
	}
	_ = errors.New
}
