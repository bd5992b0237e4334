// Package store defines the persistence contract of idem: the lifecycle of one
// idempotency key, which every store implements and [storetest] verifies.
//
// A key is absent, in progress (held by an owner under a lease) or completed
// (a [Record] kept until its TTL ends):
//
//	operation  | absent         | in progress, lease live | lease expired             | completed
//	Claim      | claimed        | in progress             | claimed (takeover)        | completed + record
//	Complete   | ErrLeaseLost   | token current: done     | token current and untaken | ErrLeaseLost
//	Release    | no-op          | token current: absent   | as Complete               | ErrLeaseLost
//	Renew      | ErrLeaseLost   | token current: renewed  | as Complete               | ErrLeaseLost
//
// A store that implements [Liveness] also takes over a key in progress
// whose holder the claim names dead (ClaimRequest.Dead), as if its lease had
// ended, and names the holder when it answers InProgress
// (ClaimResult.Holder).
//
// Every transition is one atomic step. Tokens are fencing tokens: a claim's
// [Token.Fence] is larger than that of every earlier claim of the key, so an
// owner whose lease was taken over can never overwrite the new owner's result,
// and a system downstream that keeps, per key, the largest fence it has seen
// (UPDATE ... WHERE fence < $1) refuses the writes of every earlier claim.
//
// Fences never go back for a key, across its records too. A key's record
// starts with a claim of the absent key and ends with a release, a Forget
// or its expiry; a takeover (a claim after the holder's lease ended without
// a result) stays in the record. Within a record every claim raises the
// fence by one or more. A store keeps nothing of a record once it is gone,
// so the claim that starts a record takes its fence from a clock: at least
// the microseconds since 2025-01-01 UTC at the claim (more where the store
// still holds a larger fence: a leftover record of the key, a counter of
// its own). That assumes the clock does not go back by more than the time
// between the key's records, and that no key is claimed more than once a
// microsecond on average; each store says whose clock it reads, and
// docs/semantics.md ("Fences") what happens when a clock steps back.
// Fences stay at or below 2^53. [ClaimResult.Attempt] counts the claims of
// the current record.
//
// Leases and TTLs are always finite; a zero or negative one, or one longer
// than [MaxDuration], is rejected with [ErrInvalidArgument].
//
// Stores report their own failures (a network error, a timeout) as plain
// errors; the runtime reports those to callers as idem.ErrStoreUnavailable and
// never mistakes them for a result.
package store

import (
	"context"
	"time"
)

// Store persists the state of idempotency keys. Implementations are safe for
// concurrent use. Keys reach a store already validated by [ValidateKey].
//
// A store keeps its own copy of the byte slices it is given. The records and
// slices it returns may be shared with other callers: they are read-only.
type Store interface {
	// Claim tries to take the key for req.Owner. See [Status] for the outcomes.
	// A Claim by the owner that already holds the key returns Claimed with the
	// same token, so a retried Claim whose reply was lost is harmless.
	Claim(ctx context.Context, key string, req ClaimRequest) (ClaimResult, error)
	// Complete stores rec as the key's result for ttl, if tok still holds the
	// key, and returns the record as stored (with Token, CreatedAt, ExpiresAt
	// filled in). Otherwise it returns ErrLeaseLost. Completing again with the
	// same token after success returns the stored record (replay).
	Complete(ctx context.Context, key string, tok Token, rec Record, ttl time.Duration) (Record, error)
	// Release gives back the key held by tok, so the next Claim executes.
	// Releasing an absent key is a no-op; releasing a key held by another
	// token, or completed, returns ErrLeaseLost.
	Release(ctx context.Context, key string, tok Token) error
	// Renew renews the lease of tok to lease from now, or returns ErrLeaseLost.
	Renew(ctx context.Context, key string, tok Token, lease time.Duration) error
	// Get returns the completed record of key, or ErrNotFound when the key is
	// absent or in progress.
	Get(ctx context.Context, key string) (Record, error)
	// Forget deletes the completed record of key. Forgetting an absent key is a
	// no-op; forgetting a key in progress returns ErrInProgress.
	Forget(ctx context.Context, key string) error
}

// Token identifies one claim of a key.
type Token struct {
	// Fence is larger than the fence of every earlier claim of the key,
	// in its record and in the key's earlier records (see the package
	// documentation). It is at least 1 and at most 2^53.
	Fence uint64
	// Owner is the owner string given to Claim.
	Owner string
}

// IsZero reports whether t is the zero Token (no claim).
func (t Token) IsZero() bool { return t.Fence == 0 && t.Owner == "" }

// ClaimRequest is the input of [Store.Claim].
type ClaimRequest struct {
	// Owner names this claim attempt; it must be unique across all claims of
	// all processes (the runtime uses a random instance id and a counter).
	Owner string
	// Lease is how long the claim holds the key without being renewed. It
	// must be positive.
	Lease time.Duration
	// TTL is how long the result is meant to be kept. It must be positive. A
	// store keeps an in-progress record at least this long after its lease,
	// so that a takeover finds it: it raises the record's fence and counts
	// one more attempt.
	TTL time.Duration
	// Fingerprint is stored with the claim and returned to later claimers.
	Fingerprint []byte
	// Waiter, when not empty, asks the store to wake that instance (see
	// [Waker]) when the key settles, if the key is in progress elsewhere.
	Waiter string
	// Dead, when not empty, is the owner of a holder the caller found
	// dead (see [Liveness]): if the key is in progress under exactly this
	// owner, the claim takes it over as if its lease had ended (Takeover,
	// a higher fence, one more attempt). Held by any other owner, the key
	// is answered as usual. Only stores that implement Liveness read it.
	Dead string
}

// Status is the outcome of a claim.
type Status uint8

// The outcomes of [Store.Claim].
const (
	// Claimed: the caller now holds the key; ClaimResult.Token is its token.
	Claimed Status = iota + 1
	// Completed: the key has a result; ClaimResult.Record holds it.
	Completed
	// InProgress: another owner holds a live lease; ClaimResult.LeaseLeft and
	// ClaimResult.Fingerprint describe it.
	InProgress
)

// String returns the status name.
func (s Status) String() string {
	switch s {
	case Claimed:
		return "claimed"
	case Completed:
		return "completed"
	case InProgress:
		return "in-progress"
	}
	return "unknown"
}

// ClaimResult is the output of [Store.Claim].
type ClaimResult struct {
	Status Status
	// Token is the caller's new token (Claimed) or the holder's token with an
	// empty Owner (InProgress).
	Token Token
	// Takeover is true when a Claimed key was held by an owner whose lease
	// had expired. A Claim sent again after its reply was lost (the Redis
	// store does this itself) is answered as the holder's own replay, with
	// Takeover false, even when its first run took the key over.
	Takeover bool
	// Attempt is the number of claims of the key since its record was
	// created, this one included (Claimed): 1 for the claim that created
	// it, one more for each takeover. A release, a Forget or the record's
	// expiry ends the record, so the next claim is 1 again. A Claim sent
	// again by the holder (its reply was lost) answers the holder's
	// attempt. A store that does not count claims leaves it 0.
	Attempt uint32
	// LeaseLeft is the lease time left to the holder (InProgress) or to the
	// caller (Claimed).
	LeaseLeft time.Duration
	// Fingerprint is the holder's fingerprint (InProgress).
	Fingerprint []byte
	// Holder is the holder's owner (InProgress), from a store that
	// implements [Liveness]; others may leave it empty.
	Holder string
	// Record is the stored result (Completed).
	Record Record
}

// Record is a stored result: a value, or a permanent error.
type Record struct {
	// Value is the encoded result; nil when Failed.
	Value []byte
	// Failed is true when the key's result is a permanent error.
	Failed bool
	// Error is the permanent error's message when Failed.
	Error string
	// Fingerprint of the request that produced the record.
	Fingerprint []byte
	// CreatedAt is when the record was stored, by the store's clock.
	CreatedAt time.Time
	// ExpiresAt is when the record ends, by the store's clock.
	ExpiresAt time.Time
	// Token is the claim that produced the record.
	Token Token
}

// InProcess is implemented by stores whose operations never wait on I/O
// (the in-memory store). The runtime runs their operations directly on a
// shard's goroutine instead of sending them to a batch worker.
type InProcess interface {
	InProcess()
}

// OwnerCompleter is implemented by stores in which the owner of a key
// completes it itself, on its own goroutine, as soon as its function
// returns: the record goes to the store without a hop through the shard's
// batches, and the shard learns the store's answer from the owner. A store
// implements it when its Complete is cheap enough to run there (memstore:
// it never waits on I/O). The runtime still retries a Complete such a
// store failed, from the shard, as for any store.
type OwnerCompleter interface {
	Store
	// OwnerCompletes marks the capability; it does nothing.
	OwnerCompletes()
}

// Waker is implemented by stores that can tell an instance when a key it
// waits on, held by another instance, settles.
type Waker interface {
	// Subscribe starts delivering wake-ups to fn until stop is called. It
	// returns the id to pass as ClaimRequest.Waiter. fn receives the key that
	// settled, or "" when wake-ups may have been lost (a reconnect), in which
	// case every waiting key should be checked again. fn must not block.
	Subscribe(ctx context.Context, fn func(key string)) (id string, stop func(), err error)
}

// Liveness is implemented by stores that keep a liveness record per
// instance, so that the keys of an instance that died can be taken over in
// seconds while leases stay long enough to ride out a store outage (see
// docs/semantics.md, "Early takeover").
//
// The runtime beats every second or so. A waiter that finds a key in
// progress (ClaimResult.Holder) checks the holder's instance with Live,
// and, when it is not live, claims again with ClaimRequest.Dead set to the
// holder it saw. The check and the claim are two steps (on Redis Cluster
// the liveness record is in another slot than the key): the claim takes
// the key over only if the same owner still holds it, so a key that
// changed hands meanwhile is left alone.
type Liveness interface {
	// Beat records that instance is live for ttl from now, by the store's
	// clock. ttl must be positive and at most MaxDuration.
	Beat(ctx context.Context, instance string, ttl time.Duration) error
	// Live reports whether instance has beaten within its last ttl.
	Live(ctx context.Context, instance string) (bool, error)
}

// Counted is implemented by stores that count events an operator should
// see: the runtime reports them (idem.Runtime.StoreCounts) and idemprom
// exports them as idem_store_events_total{event=Name}.
type Counted interface {
	// Counts returns the store's counters since it was made, in a fixed
	// order.
	Counts() []Count
}

// Count is one counter of a store.
type Count struct {
	Name  string // snake_case, e.g. "slot_reloads"
	Help  string // what it counts
	Value uint64
}

// TimeoutFloor is implemented by stores whose operations may outlast the
// deadline of their context: a client that bounds its socket reads by a
// timeout of its own and not by the context's deadline. The runtime warns
// at start when its StoreTimeout is shorter than that floor, since a
// stalled server then holds each batch for the floor, not StoreTimeout.
type TimeoutFloor interface {
	// TimeoutFloor returns how long an operation on a server that stopped
	// answering can take whatever its context's deadline: 0 when the
	// context's deadline bounds it, a negative value when nothing does.
	TimeoutFloor() time.Duration
}

// SizeLimited is implemented by stores whose server bounds the size of
// what it is sent (Redis's proto-max-bulk-len). An operation over the
// bound is refused with [ErrTooLarge] before it is sent: on Redis it
// would break the connection, and with it the other operations of its
// batch.
//
// The runtime keeps every result at least [RecordOverhead] below the
// bound: a result over MaxRecordBytes - RecordOverhead never reaches the
// store (idem.ErrResultTooLarge), whatever idem.Options.MaxResultBytes
// says.
type SizeLimited interface {
	// MaxRecordBytes returns the largest record the store writes, in
	// bytes: the encoded result or error message with the store's header,
	// token and fingerprint. It is fixed when the store is made.
	MaxRecordBytes() int
}

// RecordOverhead is the room the runtime leaves in a [SizeLimited]
// store's records for what the store adds to the encoded result: its
// header, the claim's token and the fingerprint (a SHA-256 digest takes
// 32 bytes; a record whose fingerprint does not fit is refused with
// [ErrTooLarge], and so is a claim whose fingerprint leaves less than
// RecordOverhead under the bound: no record of its key could hold a
// result, nor the small permanent error stored in place of one).
const RecordOverhead = 4 << 10
