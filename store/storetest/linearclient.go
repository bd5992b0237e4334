package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/idemrt/idem/store"
)

// client is one caller of a linearizability history.
type client struct {
	id   int
	h    Harness
	o    LinearOptions
	r    *recorder
	st   store.Store
	base time.Time // the store's time at the start (exact clock only)
	keys []string
	rng  *rand.Rand
	seq  int
	// own holds the token of each key this client claimed and has not
	// finished; pending the owner of a claim whose outcome is unknown.
	own     map[string]store.Token
	pending map[string]string
}

var fingerprints = []string{"", "fp1", "fp2"}

func (c *client) run(faultOn *atomic.Bool) {
	after := 0 // calls since the fault ended
	for n := 0; ; n++ {
		on := faultOn.Load()
		if !on {
			after++
		}
		if n >= c.o.Ops && !on && (c.o.Fault == nil || after > c.o.Ops/4) {
			return
		}
		if c.r.t.Failed() {
			return
		}
		if c.step() && faultOn.Load() {
			// A call of unknown outcome stays open to the end of the
			// history, and porcupine's search grows steeply with the open
			// calls on a key: a client that lost a reply to the fault
			// waits for the fault to end instead of piling up more of them
			// (a loaded machine turned 300ms of a restarted server into
			// 46 open calls and a check that found no answer in 30s).
			for faultOn.Load() && !c.r.t.Failed() {
				time.Sleep(5 * time.Millisecond)
			}
		}
		if c.o.Think > 0 {
			time.Sleep(c.o.Think)
		} else {
			runtime.Gosched()
		}
	}
}

// short picks a lease or TTL: on an exact clock, half the time one of units
// Units, which ends during the history (the clock moves by up to 2 Units per
// tick); else one that outlives it.
func (c *client) short(units ...int) time.Duration {
	if c.h.Exact && c.rng.IntN(2) == 0 {
		return time.Duration(units[c.rng.IntN(len(units))]) * c.h.Unit
	}
	return long * c.h.Unit
}

// token picks the token of a call that needs one: mostly the client's own,
// else another client's, a forged one, or a mix of two.
func (c *client) token(key string) store.Token {
	own, ok := c.own[key]
	switch p := c.rng.IntN(20); {
	case ok && p < 12:
		return own
	case p < 17:
		if tok, ok := c.r.anyToken(key, c.rng); ok {
			return tok
		}
	case p < 19:
		if tok, ok := c.r.anyToken(key, c.rng); ok {
			if other, ok := c.r.anyToken(key, c.rng); ok {
				return store.Token{Fence: tok.Fence, Owner: other.Owner}
			}
		}
	}
	return store.Token{Fence: uint64(c.rng.IntN(6) + 1), Owner: "forged"}
}

// step makes one call and records it; it reports whether the call's
// outcome is unknown.
func (c *client) step() bool {
	p := c.rng.IntN(100)
	key := c.keys[c.rng.IntN(len(c.keys))]
	if p >= 30 && p < 72 && c.rng.IntN(3) > 0 { // complete, release, renew: mostly a key the client holds
		var held []string
		for _, k := range c.keys {
			if _, ok := c.own[k]; ok {
				held = append(held, k)
			}
		}
		if len(held) > 0 {
			key = held[c.rng.IntN(len(held))]
		}
	}
	c.seq++
	in := LinearInput{Key: key}
	switch {
	case p < 30:
		in.Kind = store.OpClaim
		in.Owner = fmt.Sprintf("c%d.%d", c.id, c.seq)
		if pend := c.pending[key]; pend != "" && c.rng.IntN(2) == 0 {
			in.Owner = pend // retry a claim whose reply was lost
		} else if own, ok := c.own[key]; ok && c.rng.IntN(5) == 0 {
			in.Owner = own.Owner
		}
		in.Lease = c.short(1, 2)
		in.TTL = long * c.h.Unit
		in.Fingerprint = fingerprints[c.rng.IntN(len(fingerprints))]
	case p < 50:
		in.Kind = store.OpComplete
		in.Token = c.token(key)
		in.TTL = c.short(1, 3)
		in.Fingerprint = fingerprints[c.rng.IntN(len(fingerprints))]
		if c.rng.IntN(4) == 0 {
			in.Failed, in.Error = true, fmt.Sprintf("e%d.%d", c.id, c.seq)
		} else {
			in.Value = fmt.Sprintf("v%d.%d", c.id, c.seq)
		}
	case p < 60:
		in.Kind = store.OpRelease
		in.Token = c.token(key)
	case p < 72:
		in.Kind = store.OpRenew
		in.Token = c.token(key)
		in.Lease = c.short(1, 2)
	case p < 90:
		in.Kind = store.OpGet
	default:
		in.Kind = store.OpForget
	}
	call := c.r.now()
	out := c.do(in)
	c.r.add(c.id, in, out, call)
	c.learn(in, out)
	return out.Unknown
}

// do makes the call and records its answer.
func (c *client) do(in LinearInput) LinearOutput {
	ctx, cancel := context.WithTimeout(context.Background(), c.o.OpTimeout)
	defer cancel()
	bytes := func(s string) []byte {
		if s == "" {
			return nil
		}
		return []byte(s)
	}
	switch in.Kind {
	case store.OpClaim:
		res, err := c.st.Claim(ctx, in.Key, store.ClaimRequest{Owner: in.Owner, Lease: in.Lease, TTL: in.TTL,
			Fingerprint: bytes(in.Fingerprint)})
		out := c.outcome(err)
		if err == nil {
			out.Status, out.Token, out.Takeover, out.LeaseLeft = res.Status, res.Token, res.Takeover, res.LeaseLeft
			out.Attempt = res.Attempt
			out.Fingerprint, out.Record = string(res.Fingerprint), c.record(res.Record)
		}
		return out
	case store.OpComplete:
		rec, err := c.st.Complete(ctx, in.Key, in.Token, store.Record{Value: bytes(in.Value), Failed: in.Failed,
			Error: in.Error, Fingerprint: bytes(in.Fingerprint)}, in.TTL)
		out := c.outcome(err)
		if err == nil {
			out.Record = c.record(rec)
		}
		return out
	case store.OpRelease:
		return c.outcome(c.st.Release(ctx, in.Key, in.Token))
	case store.OpRenew:
		return c.outcome(c.st.Renew(ctx, in.Key, in.Token, in.Lease))
	case store.OpGet:
		rec, err := c.st.Get(ctx, in.Key)
		out := c.outcome(err)
		if err == nil {
			out.Record = c.record(rec)
		}
		return out
	default:
		return c.outcome(c.st.Forget(ctx, in.Key))
	}
}

func (c *client) record(r store.Record) LinearRecord {
	out := LinearRecord{Value: string(r.Value), Failed: r.Failed, Error: r.Error, Fingerprint: string(r.Fingerprint),
		Token: r.Token, Life: r.ExpiresAt.Sub(r.CreatedAt)}
	if c.h.Exact {
		out.Created = r.CreatedAt.Sub(c.base)
	}
	return out
}

// learn updates the tokens the client holds from an answer.
func (c *client) learn(in LinearInput, out LinearOutput) {
	switch in.Kind {
	case store.OpClaim:
		switch {
		case out.Unknown:
			c.pending[in.Key] = in.Owner
		case out.Err == NoError && out.Status == store.Claimed:
			c.own[in.Key] = out.Token
			c.r.share(in.Key, out.Token)
			delete(c.pending, in.Key)
		}
	case store.OpComplete, store.OpRelease:
		if !out.Unknown && c.own[in.Key] == in.Token {
			delete(c.own, in.Key)
		}
	case store.OpRenew:
		if out.Err == LeaseLost && c.own[in.Key] == in.Token {
			delete(c.own, in.Key)
		}
	}
}

// outcome turns a store error into a history's output.
func (c *client) outcome(err error) LinearOutput {
	switch {
	case err == nil:
		return LinearOutput{}
	case errors.Is(err, store.ErrLeaseLost):
		return LinearOutput{Err: LeaseLost}
	case errors.Is(err, store.ErrNotFound):
		return LinearOutput{Err: NotFound}
	case errors.Is(err, store.ErrInProgress):
		return LinearOutput{Err: InProgress}
	case store.IsContract(err):
		return LinearOutput{Err: OtherError}
	case c.o.Indefinite != nil && c.o.Indefinite(err):
		return LinearOutput{Unknown: true}
	}
	c.r.t.Errorf("client %d: unexpected error: %v", c.id, err)
	return LinearOutput{Unknown: true}
}
