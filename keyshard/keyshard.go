// Package keyshard maps idempotency keys to shards.
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
func Index(key string, n int) int {
	// Fold the high bits in: FNV-1a's low bits alone mix poorly for keys that
	// differ only in their last byte when n is a power of two.
	h := Hash(key)
	h ^= h >> 29
	return int(h % uint64(n))
}
