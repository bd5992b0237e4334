package actors

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestLRUIndexCraftedHashes drives the index alone with hashes chosen to
// collide: equal full hashes, and homes packed at the end of the table so
// that runs wrap around to its start, with deletes from anywhere in a run
// and reinsertions, against a map. Every key held must be found, every key
// removed must not, and no run may have a hole before a key's slot.
func TestLRUIndexCraftedHashes(t *testing.T) {
	for _, tc := range []struct {
		name string
		hash func(rng *rand.Rand, i int) uint64
	}{
		{"same", func(*rand.Rand, int) uint64 { return 0xdeadbeef }},
		{"top", func(rng *rand.Rand, _ int) uint64 { return uint64(1<<40 - 1 - rng.IntN(3)) }},
		{"twoHomes", func(rng *rand.Rand, _ int) uint64 { return uint64(rng.IntN(2)) * 7 }},
		{"spread", func(rng *rand.Rand, _ int) uint64 { return rng.Uint64() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var x lruIndex
			x.init()
			rng := rand.New(rand.NewPCG(5, 6))
			held := map[string]*lruEntry{}
			hashes := map[string]uint64{}
			for step := range 20_000 {
				k := strconv.Itoa(rng.IntN(60))
				h, ok := hashes[k]
				if !ok {
					h = tc.hash(rng, step)
					hashes[k] = h
				}
				if e := held[k]; e != nil && rng.IntN(2) == 0 {
					x.remove(e)
					delete(held, k)
				} else if e == nil {
					e = &lruEntry{key: k, hash: h}
					x.put(e)
					held[k] = e
				}
				if rng.IntN(500) == 0 { // an occasional purge
					x.init()
					clear(held)
				}
				if x.n != len(held) {
					t.Fatalf("step %d: n %d, held %d", step, x.n, len(held))
				}
				for k, h := range hashes {
					if got := x.get(k, h); got != held[k] {
						t.Fatalf("step %d: get(%s) = %v, want %v", step, k, got, held[k])
					}
				}
				m := x.mask()
				for i, sl := range x.slots {
					if sl.e == nil {
						continue
					}
					for j := sl.hash & m; j != uint64(i); j = (j + 1) & m {
						if x.slots[j].e == nil {
							t.Fatalf("step %d: slot %d is past a hole at %d", step, i, j)
						}
					}
				}
			}
		})
	}
}
