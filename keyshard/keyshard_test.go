package keyshard_test

import (
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/idemrt/idem/keyshard"
)

// Published FNV-1a 64-bit test vectors (the FNV reference test suite).
var fnv1a64Vectors = []struct {
	in   string
	want uint64
}{
	{"", 14695981039346656037}, // the offset basis
	{"a", 0xaf63dc4c8601ec8c},
	{"b", 0xaf63df4c8601f1a5},
	{"c", 0xaf63de4c8601eff2},
	{"foo", 0xdcb27518fed9d577},
	{"foobar", 0x85944171f73967e8},
	{"chongo was here!\n", 0x46810940eff5f915},
}

func TestHashKnownVectors(t *testing.T) {
	for _, v := range fnv1a64Vectors {
		if got := keyshard.Hash(v.in); got != v.want {
			t.Errorf("Hash(%q) = %#x, want %#x", v.in, got, v.want)
		}
	}
}

// TestHashMatchesStdlib compares Hash with hash/fnv's FNV-1a 64 on random
// keys of every length up to 64, including non-ASCII bytes.
func TestHashMatchesStdlib(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for n := range 65 {
		for range 50 {
			b := make([]byte, n)
			for i := range b {
				b[i] = byte(rng.Uint32())
			}
			ref := fnv.New64a()
			ref.Write(b)
			if got, want := keyshard.Hash(string(b)), ref.Sum64(); got != want {
				t.Fatalf("Hash(%x) = %#x, hash/fnv says %#x", b, got, want)
			}
		}
	}
}

func TestHashStable(t *testing.T) {
	for _, k := range []string{"", "a", "order-42", "tenant/7/payment/9f86d081"} {
		first := keyshard.Hash(k)
		for range 3 {
			if again := keyshard.Hash(k); again != first {
				t.Fatalf("Hash(%q) changed: %#x then %#x", k, first, again)
			}
		}
		if got := keyshard.Hash(string([]byte(k))); got != first {
			t.Fatalf("Hash of an equal copy of %q differs", k)
		}
	}
}

// TestIndexPinned pins the shard of a few keys. These are part of the
// package's promise (the same key lands on the same shard in every process
// and every release); if this test breaks, routing changed for everyone. The
// values were computed outside Go from the FNV-1a definition and the mixing
// Index documents (MurmurHash3's 64-bit finalizer, then h mod n).
func TestIndexPinned(t *testing.T) {
	cases := []struct {
		key  string
		n    int
		want int
	}{
		{"", 16, 6},
		{"a", 16, 11},
		{"order-42", 16, 6},
		{"order-42", 64, 6},
		{"user:1001", 8, 2},
		{"user:1001", 7, 2},
	}
	for _, c := range cases {
		if got := keyshard.Index(c.key, c.n); got != c.want {
			t.Errorf("Index(%q, %d) = %d, want %d", c.key, c.n, got, c.want)
		}
	}
}

func TestIndexInRange(t *testing.T) {
	keys := make([]string, 0, 2000)
	for i := range 1000 {
		keys = append(keys, fmt.Sprintf("key-%d", i))
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for range 1000 {
		b := make([]byte, rng.IntN(40))
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		keys = append(keys, string(b))
	}
	ns := []int{1, 2, 3, 5, 7, 8, 10, 16, 31, 64, 100, 128, 255, 256, 1000, 1 << 20, math.MaxInt32, math.MaxInt}
	for n := 1; n <= 300; n++ {
		ns = append(ns, n)
	}
	for _, n := range ns {
		for _, k := range keys {
			if got := keyshard.Index(k, n); got < 0 || got >= n {
				t.Fatalf("Index(%q, %d) = %d, outside [0, %d)", k, n, got, n)
			}
		}
	}
}

func TestIndexOneShard(t *testing.T) {
	for i := range 1000 {
		if got := keyshard.Index(fmt.Sprint(i), 1); got != 0 {
			t.Fatalf("Index(%d, 1) = %d, want 0", i, got)
		}
	}
}

func TestIndexStable(t *testing.T) {
	for i := range 1000 {
		k := fmt.Sprintf("idem-%d", i)
		for _, n := range []int{8, 13, 64} {
			if a, b := keyshard.Index(k, n), keyshard.Index(k, n); a != b {
				t.Fatalf("Index(%q, %d) = %d then %d", k, n, a, b)
			}
		}
	}
}

// spread returns max/avg and min/avg of the shard loads of keys over n shards.
func spread(keys []string, n int) (hi, lo float64) {
	counts := make([]int, n)
	for _, k := range keys {
		counts[keyshard.Index(k, n)]++
	}
	most, least := counts[0], counts[0]
	for _, c := range counts {
		most, least = max(most, c), min(least, c)
	}
	avg := float64(len(keys)) / float64(n)
	return float64(most) / avg, float64(least) / avg
}

func TestIndexSpread(t *testing.T) {
	const total = 100_000
	families := map[string]func(i int) string{
		"key-%d":       func(i int) string { return fmt.Sprintf("key-%d", i) },
		"zero-padded":  func(i int) string { return fmt.Sprintf("req-%08d", i) },
		"uuid-like":    uuidLike(rand.New(rand.NewPCG(5, 6))),
		"tenant/order": func(i int) string { return fmt.Sprintf("tenant-%d/order-%d", i%37, i) },
	}
	for name, gen := range families {
		keys := make([]string, total)
		for i := range keys {
			keys[i] = gen(i)
		}
		for _, n := range []int{8, 16, 64} {
			hi, lo := spread(keys, n)
			if hi >= 1.1 {
				t.Errorf("%s over %d shards: max/avg = %.3f, want < 1.1", name, n, hi)
			}
			if lo <= 0.9 {
				t.Errorf("%s over %d shards: min/avg = %.3f, want > 0.9", name, n, lo)
			}
		}
	}
}

// Index mixes the hash's bits before taking it modulo n because FNV-1a's low bits mix poorly for keys that differ only in their
// last byte when n is a power of two. Concretely: without mixing, two last
// bytes equal modulo n put every pair of such keys on the same shard. After
// the mixing, such a pair should share a shard about as often as two random
// keys do (1 time in n).
func TestIndexLastByteDecorrelated(t *testing.T) {
	const prefixes = 2000
	for _, c := range []struct {
		a, b byte
		n    int
	}{
		{'0', '8', 8},  // decimal keys, 8 shards
		{'1', 'a', 16}, // hex keys, 16 shards
		{'1', 'q', 64}, // alphanumeric keys, 64 shards
		{'A', 'Q', 16}, // upper case, 16 shards
	} {
		same := 0
		for i := range prefixes {
			p := fmt.Sprintf("order-%d-", i)
			if keyshard.Index(p+string(c.a), c.n) == keyshard.Index(p+string(c.b), c.n) {
				same++
			}
		}
		// Random would be prefixes/n; allow three times that.
		if limit := 3 * prefixes / c.n; same > limit {
			t.Errorf("last bytes %q and %q share a shard of %d for %d of %d prefixes, want at most %d",
				c.a, c.b, c.n, same, prefixes, limit)
		}
	}
}

func uuidLike(rng *rand.Rand) func(int) string {
	return func(int) string {
		return fmt.Sprintf("%08x-%04x-%04x-%04x-%012x",
			rng.Uint32(), rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint32()&0xffff, rng.Uint64()&0xffffffffffff)
	}
}

func TestHashAndIndexAllocateNothing(t *testing.T) {
	key := "tenant-7/order-123456"
	var sink uint64
	if a := testing.AllocsPerRun(100, func() { sink += keyshard.Hash(key) }); a != 0 {
		t.Errorf("Hash allocates %v times per call", a)
	}
	if a := testing.AllocsPerRun(100, func() { sink += uint64(keyshard.Index(key, 64)) }); a != 0 {
		t.Errorf("Index allocates %v times per call", a)
	}
	_ = sink
}
