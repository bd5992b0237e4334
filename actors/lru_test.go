package actors

import (
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"github.com/idemrt/idem/store"
)

func cachedOf(v string) Cached {
	return Cached{Record: store.Record{Value: []byte(v)}, Size: len(v)}
}

// TestResultLRU checks the cache against a model: a slice of keys, oldest
// first, with their values; every value that leaves must reach onEvict
// exactly once, so that the shard's byte count stays exact. The larger
// cache makes its index grow and delete within long runs of slots.
func TestResultLRU(t *testing.T) {
	t.Run("5", func(t *testing.T) { testResultLRU(t, 5, 9, 20000) })
	t.Run("300", func(t *testing.T) { testResultLRU(t, 300, 700, 30000) })
}

func testResultLRU(t *testing.T, size, nkeys, steps int) {
	var out int // sizes of the values handed to onEvict
	c := newResultLRU(size, func(v Cached) { out += v.Size })
	type item struct{ key, val string }
	var model []item // oldest first
	in := 0          // sizes of the values added
	find := func(k string) int {
		return slices.IndexFunc(model, func(it item) bool { return it.key == k })
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range steps {
		k := "k" + strconv.Itoa(rng.IntN(nkeys))
		switch op := rng.IntN(10); {
		case op < 4:
			v := k + "-" + strconv.Itoa(step)
			in += len(v)
			evicted := c.Add(k, cachedOf(v))
			wantEvicted := false
			if i := find(k); i >= 0 {
				model = slices.Delete(model, i, i+1)
			} else if len(model) == size {
				model, wantEvicted = model[1:], true
			}
			model = append(model, item{k, v})
			if evicted != wantEvicted {
				t.Fatalf("step %d: Add(%s) evicted %v, want %v", step, k, evicted, wantEvicted)
			}
		case op < 7:
			got, ok := c.Get(k)
			i := find(k)
			if ok != (i >= 0) || ok && string(got.Record.Value) != model[i].val {
				t.Fatalf("step %d: Get(%s) = %q, %v; model %v", step, k, got.Record.Value, ok, model)
			}
			if ok {
				it := model[i]
				model = append(slices.Delete(model, i, i+1), it)
			}
		case op < 9:
			i := find(k)
			if got := c.Remove(k); got != (i >= 0) {
				t.Fatalf("step %d: Remove(%s) = %v; model %v", step, k, got, model)
			}
			if i >= 0 {
				model = slices.Delete(model, i, i+1)
			}
		default:
			k, v, ok := c.RemoveOldest()
			if ok != (len(model) > 0) || ok && (k != model[0].key || string(v.Record.Value) != model[0].val) {
				t.Fatalf("step %d: RemoveOldest = %s %q %v; model %v", step, k, v.Record.Value, ok, model)
			}
			if ok {
				model = model[1:]
			}
		}
		keys := c.Keys()
		if c.Len() != len(model) || len(keys) != len(model) {
			t.Fatalf("step %d: Len %d, Keys %v; model %v", step, c.Len(), keys, model)
		}
		held := 0
		for i, it := range model {
			if keys[i] != it.key {
				t.Fatalf("step %d: Keys %v; model %v", step, keys, model)
			}
			held += len(it.val)
		}
		if in-out != held {
			t.Fatalf("step %d: added %d - evicted %d bytes, but %d held", step, in, out, held)
		}
	}
	c.Purge()
	if c.Len() != 0 || len(c.Keys()) != 0 || in != out {
		t.Fatalf("after Purge: Len %d, Keys %v, %d bytes added, %d evicted", c.Len(), c.Keys(), in, out)
	}
	c.Add("a", cachedOf("x"))
	if v, ok := c.Get("a"); !ok || string(v.Record.Value) != "x" {
		t.Fatalf("after Purge, Add then Get = %q, %v", v.Record.Value, ok)
	}
}

// A cache asked for no room holds one result: Add evicts until the new
// entry fits, which a size of zero never lets it do.
func TestResultLRUOfSizeZeroHoldsOne(t *testing.T) {
	var evicted int
	c := newResultLRU(0, func(Cached) { evicted++ })
	c.Add("a", cachedOf("1"))
	c.Add("b", cachedOf("2"))
	if _, ok := c.Get("b"); !ok || c.Len() != 1 || evicted != 1 {
		t.Fatalf("after two adds: b held %v, len %d, evicted %d; want b held, 1, 1", ok, c.Len(), evicted)
	}
}
