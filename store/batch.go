package store

import (
	"context"
	"time"
)

// OpKind names a store operation in a batch.
type OpKind uint8

// The operations a batch can hold.
const (
	OpClaim OpKind = iota + 1
	OpComplete
	OpRelease
	OpRenew
	OpGet
	OpForget
)

// String returns the operation's name.
func (k OpKind) String() string {
	switch k {
	case OpClaim:
		return "claim"
	case OpComplete:
		return "complete"
	case OpRelease:
		return "release"
	case OpRenew:
		return "renew"
	case OpGet:
		return "get"
	case OpForget:
		return "forget"
	}
	return "unknown"
}

// Op is one operation of a batch, with room for its result.
type Op struct {
	Kind OpKind
	Key  string

	Claim  ClaimRequest  // OpClaim
	Token  Token         // OpComplete, OpRelease, OpRenew
	Record Record        // OpComplete: Value, Failed, Error, Fingerprint
	TTL    time.Duration // OpComplete
	Lease  time.Duration // OpRenew

	// Results. Result.Record also holds the record of OpComplete (as
	// stored) and OpGet. For OpForget, a Batcher that can tell sets
	// Result.Status to Completed when it deleted a result and to zero when
	// there was nothing to delete (absent, or released); a store that
	// cannot tell leaves Result as the caller set it.
	Result ClaimResult
	Err    error
}

// Batcher is implemented by stores that run several operations in one round
// trip (a Redis pipeline). Batch fills in the result fields of every op; the
// ops are independent of each other and may touch the same key.
type Batcher interface {
	Batch(ctx context.Context, ops []*Op)
}

// Run runs ops on s: as one batch when s is a [Batcher], else one by one.
func Run(ctx context.Context, s Store, ops []*Op) {
	if b, ok := s.(Batcher); ok {
		b.Batch(ctx, ops)
		return
	}
	for _, op := range ops {
		RunOne(ctx, s, op)
	}
}

// RunOne runs a single op on s with the plain (unbatched) methods.
func RunOne(ctx context.Context, s Store, op *Op) {
	switch op.Kind {
	case OpClaim:
		op.Result, op.Err = s.Claim(ctx, op.Key, op.Claim)
	case OpComplete:
		op.Result.Record, op.Err = s.Complete(ctx, op.Key, op.Token, op.Record, op.TTL)
	case OpRelease:
		op.Err = s.Release(ctx, op.Key, op.Token)
	case OpRenew:
		op.Err = s.Renew(ctx, op.Key, op.Token, op.Lease)
	case OpGet:
		op.Result.Record, op.Err = s.Get(ctx, op.Key)
	case OpForget:
		op.Err = s.Forget(ctx, op.Key)
	default:
		op.Err = ErrInvalidArgument
	}
}

// Partitioner is implemented by stores whose keys live in independent
// partitions (a Redis Cluster's masters). The runtime batches each
// partition's operations apart, with one batch in flight per partition, so
// that a slow or failing partition delays only its own keys.
type Partitioner interface {
	// Partition returns key's partition: a small non-negative number, the
	// same for a key until the store's layout changes.
	Partition(key string) int
}
