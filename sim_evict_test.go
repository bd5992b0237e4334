package idem_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/idemrt/idem/store"
)

// The eviction mode. In a quarter of the seeds (drawn from a generator of
// their own, so that the other seeds' schedules stay what they were) the
// shared memstore gets a small Options.MaxRecords, 64 to 256 (memstore
// spreads records over 64 shards: 64 is one record per shard) and evicts
// when full (memstore.EvictWhenFull; the default refuses), and every
// step claims a number of fresh filler keys directly in the store: most
// are completed at once with a short TTL, some released, some left in
// progress to be abandoned (past lease + TTL). A full shard evicts, on each
// new record, an abandoned claim, else the completed record nearest its
// expiry: the simulation's keys lose results, and lose claims if the store
// takes a live one for abandoned.
//
// Every store operation (the runtimes', the filler's) runs alone, under
// simWorld.storeMu; when memstore's Evicted count moves during one, the
// simulation probes each of its keys it expects the store to hold (a claim
// not released or completed, or a live result) with a Release under a token
// nobody holds, which changes nothing and answers nil only when the key
// holds no record. A result found gone was evicted: it counts as forgotten
// from then on, as a Forget would make it (a duplicate may run again). A
// claim found gone was evicted: allowed once its lease and TTL are over
// (abandoned); while its lease is live it breaks "once" (evictlive), and
// between its lease's end and lease + TTL it breaks memstore's documented
// policy (evictearly).

// simEvictConfig draws the eviction mode of a seed: MaxRecords (0: the
// default, no eviction mode) and the most filler claims per step.
func simEvictConfig(seed uint64) (maxRecords, fill int, rng *rand.Rand) {
	rng = rand.New(rand.NewPCG(seed, 0xe71c7))
	if rng.IntN(4) != 0 {
		return 0, 0, rng
	}
	perShard := 1 + rng.IntN(4)
	return 64 * perShard, (4 + rng.IntN(13)) * perShard, rng
}

// simProbeToken is a token no claim ever holds: a Release under it changes
// nothing and reports whether the key holds a record.
var simProbeToken = store.Token{Fence: 0, Owner: "sim-probe"}

// storeOp runs op, one operation on the shared store for key, with no other
// store operation in between, then looks for what it evicted.
func (w *simWorld) storeOp(key string, op func()) {
	w.storeMu.Lock()
	defer w.storeMu.Unlock()
	n := w.mem.Evicted()
	op()
	if w.mem.Evicted() != n {
		w.noteEvictions(key)
	}
}

// noteEvictions finds which of the simulation's keys the last store
// operation (on key) evicted. Called with w.storeMu held.
func (w *simWorld) noteEvictions(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	for i := range w.cfg.keys {
		k := w.keyName(i)
		tk := w.lastTok[k]
		if tk == nil {
			continue // never claimed
		}
		var rec *simRecord
		if tk.ended {
			for _, r := range w.records[k] {
				if r.tok == tk.tok && r.liveAt(now) {
					rec = r
				}
			}
			if rec == nil {
				continue // released, expired, forgotten or evicted: nothing to lose
			}
		}
		if err := w.mem.Release(context.Background(), k, simProbeToken); err != nil {
			continue // still there (store.ErrLeaseLost: a record under another token)
		}
		w.evictedSim++
		if rec != nil {
			rec.forgotten, rec.evicted = now, true
			w.logf("store: %s's result (exec %s, token %d, live until %s) evicted by an operation on %s", k, rec.exec, rec.tok.Fence, w.at(rec.expires), key)
			continue
		}
		w.evictedClaims++
		tk.ended, tk.endedAt, tk.evicted = true, now, true
		w.logf("store: %s's claim %d (by %s, lease until %s, TTL %v) evicted by an operation on %s", k, tk.tok.Fence, tk.rt.name, w.at(tk.leaseEnd), tk.ttl, key)
		switch {
		case now.Before(tk.leaseEnd):
			w.violate(fmt.Sprintf("evictlive/%d", tk.tok.Fence), "the store evicted claim %d of %s (by %s, %s) while its lease was live until %s: another claim can take the key while its owner runs",
				tk.tok.Fence, k, tk.rt.name, w.runsUnder(tk), w.at(tk.leaseEnd))
		case now.Before(tk.leaseEnd.Add(tk.ttl)):
			w.violate(fmt.Sprintf("evictearly/%d", tk.tok.Fence), "the store evicted claim %d of %s (by %s, %s), whose lease ended at %s, before its lease + TTL (%s) made it abandoned",
				tk.tok.Fence, k, tk.rt.name, w.runsUnder(tk), w.at(tk.leaseEnd), w.at(tk.leaseEnd.Add(tk.ttl)))
		}
	}
}

// runsUnder says which execution runs under tk. Called with w.mu held.
func (w *simWorld) runsUnder(tk *simToken) string {
	if n := len(tk.execs); n > 0 {
		x := tk.execs[n-1]
		if x.running {
			return "exec " + x.id + " running under it"
		}
		return "its exec " + x.id + " " + x.how
	}
	return "no exec started under it yet"
}

// fill claims this step's filler keys directly in the store: completed at
// once (most), released, or left in progress to be abandoned.
func (w *simWorld) fill() {
	if w.cfg.maxRecords == 0 {
		return
	}
	rng := w.fillRng
	ctx := context.Background()
	for range rng.IntN(w.cfg.fill + 1) {
		w.fillN++
		key := fmt.Sprintf("f%d", w.fillN)
		req := store.ClaimRequest{
			Owner: "filler",
			Lease: time.Duration(100+rng.IntN(900)) * time.Millisecond,
			TTL:   time.Duration(200+rng.IntN(2800)) * time.Millisecond,
		}
		var res store.ClaimResult
		var err error
		w.storeOp(key, func() { res, err = w.mem.Claim(ctx, key, req) })
		if err != nil || res.Status != store.Claimed {
			w.violate("filler/"+key, "the store answered a filler claim of %s, a new key, with %v, %v", key, res.Status, err)
			return
		}
		switch r := rng.IntN(10); {
		case r < 7:
			w.storeOp(key, func() { _, err = w.mem.Complete(ctx, key, res.Token, store.Record{Value: []byte("{}")}, req.TTL) })
		case r < 8:
			w.storeOp(key, func() { err = w.mem.Release(ctx, key, res.Token) })
		}
		if err != nil {
			w.violate("filler/"+key, "the store refused the filler's own claim of %s: %v", key, err)
			return
		}
	}
}
