package actors

import (
	"container/list"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"weak"

	"github.com/idemrt/idem/store"
)

// lruModel is the reference: a map and a container/list, newest first.
type lruModel struct {
	size int
	ll   *list.List
	m    map[string]*list.Element
}

type modelItem struct {
	key  string
	size int
}

func (m *lruModel) add(k string, sz int) (evicted bool) {
	if e, ok := m.m[k]; ok {
		e.Value = modelItem{k, sz}
		m.ll.MoveToFront(e)
		return false
	}
	if m.ll.Len() >= m.size {
		old := m.ll.Back()
		m.ll.Remove(old)
		delete(m.m, old.Value.(modelItem).key)
		evicted = true
	}
	m.m[k] = m.ll.PushFront(modelItem{k, sz})
	return evicted
}

func (m *lruModel) remove(k string) bool {
	e, ok := m.m[k]
	if ok {
		m.ll.Remove(e)
		delete(m.m, k)
	}
	return ok
}

func (m *lruModel) bytes() (n int64) {
	for e := m.ll.Front(); e != nil; e = e.Next() {
		n += int64(e.Value.(modelItem).size)
	}
	return n
}

// checkIndex checks the index's invariants: n counts its entries, each is
// found from its home slot without crossing an empty one, and the table is
// at most half full.
func checkIndex(t *testing.T, step int, c *resultLRU) {
	t.Helper()
	x := &c.items
	m := x.mask()
	n := 0
	for i, sl := range x.slots {
		if sl.e == nil {
			if sl.hash != 0 {
				t.Fatalf("step %d: empty slot %d keeps hash %x", step, i, sl.hash)
			}
			continue
		}
		n++
		if sl.hash != sl.e.hash || sl.hash != x.hash(sl.e.key) {
			t.Fatalf("step %d: slot %d hash %x, entry %x", step, i, sl.hash, sl.e.hash)
		}
		for j := sl.hash & m; j != uint64(i); j = (j + 1) & m {
			if x.slots[j].e == nil {
				t.Fatalf("step %d: slot %d (%q) is past an empty slot %d from its home %d", step, i, sl.e.key, j, sl.hash&m)
			}
		}
	}
	if n != x.n || 2*n > len(x.slots) {
		t.Fatalf("step %d: %d entries in %d slots, n %d", step, n, len(x.slots), x.n)
	}
}

// TestResultLRUAgainstModel runs long random sequences of every operation,
// through the shard's cacheAdd so that the byte bound is exercised too,
// against a map + list model: order, contents, evictions and the byte count
// must agree after every step. Keys are rebuilt for every call (equal
// strings, different arrays), and the key spaces range from a few keys to
// many more than the cache holds (long runs, wraparound, many deletes).
func TestResultLRUAgainstModel(t *testing.T) {
	for _, tc := range []struct {
		size, nkeys int
		most        int64
		steps       int
	}{
		{1, 3, 0, 20000},
		{1, 3, 10, 20000},
		{2, 5, 0, 20000},
		{7, 40, 30, 60000},
		{16, 17, 0, 60000},
		{64, 200, 400, 100000},
		{1000, 1500, 0, 100000},
		{1000, 5000, 20000, 100000},
	} {
		name := strconv.Itoa(tc.size) + "-" + strconv.Itoa(tc.nkeys) + "-" + strconv.FormatInt(tc.most, 10)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			testLRUModel(t, tc.size, tc.nkeys, tc.most, tc.steps)
		})
	}
}

func testLRUModel(t *testing.T, size, nkeys int, most int64, steps int) {
	s := &shard{cfg: &Config{CacheEntries: size, CacheBytes: most}}
	s.cache = newResultLRU(size, func(c Cached) { s.cacheBytes.Add(-int64(c.Size)) })
	m := &lruModel{size: size, ll: list.New(), m: map[string]*list.Element{}}
	rng := rand.New(rand.NewPCG(uint64(size), uint64(nkeys)))
	key := func() string {
		// A fresh array each time: equal keys need not share memory.
		return strings.Clone("key/" + strconv.Itoa(rng.IntN(nkeys)))
	}
	for step := range steps {
		switch op := rng.IntN(100); {
		case op < 45:
			k := key()
			sz := rng.IntN(12)
			if most > 0 && rng.IntN(50) == 0 {
				sz = int(most) + 1 // heavier than the whole bound
			}
			v := Cached{Record: store.Record{Value: []byte(k)}, Size: sz}
			s.cacheAdd(k, v)
			if most > 0 && int64(sz) > most {
				m.remove(k)
				break
			}
			m.add(k, sz)
			for most > 0 && m.bytes() > most {
				old := m.ll.Back()
				m.ll.Remove(old)
				delete(m.m, old.Value.(modelItem).key)
			}
		case op < 75:
			k := key()
			c, ok := s.cache.Get(k)
			e, want := m.m[k]
			if ok != want {
				t.Fatalf("step %d: Get(%s) = %v, model %v", step, k, ok, want)
			}
			if ok {
				m.ll.MoveToFront(e)
				if string(c.Record.Value) != k || c.Size != e.Value.(modelItem).size {
					t.Fatalf("step %d: Get(%s) = %q size %d, model size %d", step, k, c.Record.Value, c.Size, e.Value.(modelItem).size)
				}
			}
		case op < 90:
			k := key()
			if got, want := s.cache.Remove(k), m.remove(k); got != want {
				t.Fatalf("step %d: Remove(%s) = %v, model %v", step, k, got, want)
			}
		case op < 97:
			k, _, ok := s.cache.RemoveOldest()
			back := m.ll.Back()
			if ok != (back != nil) || ok && k != back.Value.(modelItem).key {
				t.Fatalf("step %d: RemoveOldest = %q %v, model %v", step, k, ok, back)
			}
			if back != nil {
				m.remove(k)
			}
		case op < 98 && rng.IntN(20) == 0:
			s.cache.Purge()
			m.ll.Init()
			clear(m.m)
		default:
			// Remove a run of keys, by prefix, as an invalidation does.
			p := "key/" + strconv.Itoa(rng.IntN(10))
			for _, k := range s.cache.Keys() {
				if strings.HasPrefix(k, p) {
					if !s.cache.Remove(k) || !m.remove(k) {
						t.Fatalf("step %d: Keys listed %s, not removable", step, k)
					}
				}
			}
		}
		if got, want := s.cacheBytes.Load(), m.bytes(); got != want {
			t.Fatalf("step %d: cacheBytes %d, model %d", step, got, want)
		}
		if most > 0 && s.cacheBytes.Load() > most {
			t.Fatalf("step %d: %d bytes over the bound %d", step, s.cacheBytes.Load(), most)
		}
		if s.cache.Len() != m.ll.Len() {
			t.Fatalf("step %d: Len %d, model %d", step, s.cache.Len(), m.ll.Len())
		}
		if step%97 == 0 || size < 20 {
			keys := s.cache.Keys()
			i := 0
			for e := m.ll.Back(); e != nil; e = e.Prev() {
				if keys[i] != e.Value.(modelItem).key {
					t.Fatalf("step %d: Keys[%d] = %s, model %s", step, i, keys[i], e.Value.(modelItem).key)
				}
				i++
			}
			checkIndex(t, step, s.cache)
		}
	}
}

// TestResultLRUReleasesValues checks that a value leaving the cache (by
// eviction, Remove, replacement or Purge) is not kept alive by it.
func TestResultLRUReleasesValues(t *testing.T) {
	c := newResultLRU(2, func(Cached) {})
	var refs []weak.Pointer[[1 << 16]byte]
	add := func(k string) {
		big := new([1 << 16]byte)
		refs = append(refs, weak.Make(big))
		c.Add(k, Cached{Value: big, Record: store.Record{Value: big[:]}})
	}
	add("a")
	add("b")
	add("c") // evicts a
	add("c") // replaces c
	c.Remove("b")
	add("d")
	add("e") // evicts the second c
	runtime.GC()
	runtime.GC()
	for i, r := range refs {
		if held := i >= len(refs)-2; (r.Value() != nil) != held {
			t.Errorf("value %d reachable %v, held by the cache %v", i, r.Value() != nil, held)
		}
	}
	c.Purge()
	runtime.GC()
	runtime.GC()
	for i, r := range refs {
		if r.Value() != nil {
			t.Errorf("value %d still reachable after Purge", i)
		}
	}
	runtime.KeepAlive(c) // the cache itself must stay, or the test proves nothing
}

// TestResultLRUConcurrentBytes adds from one goroutine (the shard's) while
// others hit and remove, as the hit path does with expired results: when
// all stop, the byte count is the sum of the sizes held, and within bounds.
func TestResultLRUConcurrentBytes(t *testing.T) {
	const size, most = 50, 300
	s := &shard{cfg: &Config{CacheEntries: size, CacheBytes: most}}
	s.cache = newResultLRU(size, func(c Cached) { s.cacheBytes.Add(-int64(c.Size)) })
	done := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for {
				select {
				case <-done:
					return
				default:
				}
				k := "k" + strconv.Itoa(rng.IntN(120))
				if _, ok := s.cache.Get(k); ok && rng.IntN(3) == 0 {
					s.cache.Remove(k)
				}
			}
		}()
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for range 200_000 {
		k := "k" + strconv.Itoa(rng.IntN(120))
		s.cacheAdd(k, Cached{Size: rng.IntN(20)})
	}
	close(done)
	wg.Wait()
	var sum int64
	for _, k := range s.cache.Keys() {
		c, _ := s.cache.Get(k)
		sum += int64(c.Size)
	}
	if got := s.cacheBytes.Load(); got != sum || sum > most || s.cache.Len() > size {
		t.Fatalf("cacheBytes %d, sizes held %d (bound %d), %d entries", got, sum, most, s.cache.Len())
	}
	checkIndex(t, -1, s.cache)
}
