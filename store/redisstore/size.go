package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/store"
)

// DefaultMaxRecordBytes is the record size the store assumes when the
// server refuses CONFIG GET (a managed Redis that renames or forbids
// CONFIG, an ACL user without it) and Options.MaxRecordBytes is left zero:
// Redis's own default proto-max-bulk-len, 512 MiB.
const DefaultMaxRecordBytes = 512 << 20

// minRecordBytes is the least Options.MaxRecordBytes accepted: Redis
// accepts no proto-max-bulk-len below 1 MiB.
const minRecordBytes = 1 << 20

// maxBulk returns the largest bulk string the server takes: its
// proto-max-bulk-len (on a cluster, the least of its masters'), read with
// CONFIG GET, or DefaultMaxRecordBytes where the server refuses CONFIG.
// A failure to reach the server is an error.
func maxBulk(ctx context.Context, c redis.UniversalClient) (int, error) {
	one := func(ctx context.Context, c redis.Cmdable) (int, error) {
		m, err := c.ConfigGet(ctx, "proto-max-bulk-len").Result()
		var refused redis.Error
		switch {
		case errors.As(err, &refused):
			return DefaultMaxRecordBytes, nil // answered, but not allowed
		case err != nil:
			return 0, err
		}
		v, ok := m["proto-max-bulk-len"]
		if !ok {
			return DefaultMaxRecordBytes, nil // hidden from this user
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, fmt.Errorf("proto-max-bulk-len is %q, not a positive number", v)
		}
		return int(min(n, int64(maxInt))), nil
	}
	cc, ok := c.(*redis.ClusterClient)
	if !ok {
		return one(ctx, c)
	}
	var mu sync.Mutex
	least := 0
	err := cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		n, err := one(ctx, node)
		if err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		if least == 0 || n < least {
			least = n
		}
		return nil
	})
	if err == nil && least == 0 {
		least = DefaultMaxRecordBytes
	}
	return least, err
}

const maxInt = int(^uint(0) >> 1)

// MaxRecordBytes implements [store.SizeLimited]: the largest value the
// store sends Redis, Options.MaxRecordBytes or the server's
// proto-max-bulk-len read when the store was made (see Options). An
// operation with a larger argument is refused with [store.ErrTooLarge]
// without being sent: Redis would answer it with a protocol error and
// close the connection, failing the other operations of its pipeline.
func (s *Store) MaxRecordBytes() int { return s.maxBulk }

// sizeOf returns the bytes a call sends (its keys and arguments) and its
// largest argument.
func sizeOf(c *call) (total, largest int) {
	add := func(n int) {
		total += n
		largest = max(largest, n)
	}
	for _, k := range c.keys {
		add(len(k))
	}
	for _, a := range c.args {
		switch a := a.(type) {
		case string:
			add(len(a))
		case []byte:
			add(len(a))
		default:
			add(20) // a number
		}
	}
	return total, largest
}

// checkSize refuses a call with an argument over the server's limit, and
// notes its size for the batch byte cap.
func (s *Store) checkSize(c *call) error {
	var largest int
	c.size, largest = sizeOf(c)
	if fp := len(c.op.Claim.Fingerprint); c.op.Kind == store.OpClaim && s.maxBulk > 0 && fp > s.maxBulk-store.RecordOverhead {
		// Every record of the key holds the fingerprint: one that leaves
		// no room for a result, nor for the small permanent error stored
		// in place of one too large, would let fn run with no way to
		// store what it did, and the key released, every retry would run
		// it again.
		s.nTooLarge.Add(1)
		return fmt.Errorf("redisstore: %w: a claim's fingerprint of %d bytes leaves no room for a record under the %d-byte limit of the server (proto-max-bulk-len, or Options.MaxRecordBytes), less %d (store.RecordOverhead)",
			store.ErrTooLarge, fp, s.maxBulk, store.RecordOverhead)
	}
	if s.maxBulk > 0 && largest > s.maxBulk { // (0: a Store not made by New, in tests)
		s.nTooLarge.Add(1)
		return fmt.Errorf("redisstore: %w: a %s of %d bytes, over the %d-byte limit of the server (proto-max-bulk-len, or Options.MaxRecordBytes)",
			store.ErrTooLarge, c.op.Kind, largest, s.maxBulk)
	}
	return nil
}
