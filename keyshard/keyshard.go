// Package keyshard maps idempotency keys to shards.
//
// It is the runtime's machinery, used by package actors to route keys and by
// store/memstore to spread its locks: not an API for users of idem, and
// without a compatibility promise.
//
// The hash is 64-bit FNV-1a with a fixed offset: the same key lands on the
// same shard index in every process and every run, which keeps the routing
// of a key reproducible in logs and benchmarks. It allocates nothing and
// costs a few nanoseconds per key on short keys.
package keyshard

const (
	offset64 = 14695981039346656037
	prime64  = 1099511628211
)

// Hash returns the 64-bit FNV-1a hash of key.
func Hash(key string) uint64 {
	h := uint64(offset64)
	for i := 0; i < len(key); i++ {
		h ^= uint64(key[i])
		h *= prime64
	}
	return h
}

// Index returns the shard of key among n shards, in [0, n). n must be positive.
//
// The FNV-1a hash goes through a 64-bit finalizer (xor-shift and multiply
// rounds) first: FNV-1a's last step multiplies by a prime that leaves the low
// bits of keys differing only in their last byte too alike, so with a
// power-of-two n such keys would always share a shard.
func Index(key string, n int) int {
	return int(mix(Hash(key)) % uint64(n))
}

// mix spreads every input bit over every output bit (the finalizer of
// MurmurHash3).
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
