package actors

import (
	"sync/atomic"
	"time"

	"github.com/idemrt/idem/store"
)

// Request asks a shard for a key on behalf of one caller. The caller fills
// the exported fields, sends it with [Set.Send], and reads replies from
// Reply: exactly one per phase (a Grant, then the answer to its Finish; or
// one final answer).
type Request struct {
	Key         string
	Fingerprint []byte
	Lease       time.Duration
	TTL         time.Duration
	// Settle is how long the caller may wait for another owner; zero fails
	// at once with FailConflict; the largest Duration waits as long as the
	// caller does.
	Settle time.Duration
	// NoRenew keeps the lease from being renewed while the owner runs.
	NoRenew bool
	// NoAdmit skips the shard's admission (a call made from inside a run
	// the runtime already admitted).
	NoAdmit bool
	// Direct lets Send claim the key on the caller's goroutine when the
	// store is in process and its owners complete their keys (memstore)
	// and the lease is a second or more: if the store grants the claim,
	// the Grant is in Reply when Send returns, and the shard hears of the
	// owner only when it must (see direct.go). The caller must then
	// complete the key itself, as such a store's owners do, and send its
	// Finish as any owner.
	Direct bool
	Reply  chan Reply
	// Finish is where the owner writes its Finish (one allocation for both).
	Finish Finish

	// canceler stops the owner's run; the caller writes it after a Grant,
	// then sets cancelSet. lost is set by the actor when the run must stop.
	canceler  canceler
	cancelSet atomic.Bool
	shard     *shard // set by Send
	lost      atomic.Pointer[error]

	pool pooled // see NewRequest

	// Set by Send when it claimed the key on the caller's goroutine
	// (Direct): the claim's token (and, in deadline, the clock's reading
	// just before it: see preAt). Read by the actor, which adopts the
	// request as the key's owner. preGranted: its Grant is in Reply
	// already; otherwise (a takeover, see claimHere) the shard grants it
	// once it has adopted it.
	preToken store.Token
	// dprev and dnext link a direct owner in its shard's list, under its
	// lock; dropsAt holds the shard's counts of LRU drops begun (of its
	// slot, of all) at its claim, dropsBusy whether one was under way.
	dprev, dnext *Request
	dropsAt      [2]uint32
	// dstate is the request's state as a direct owner (see direct.go).
	dstate atomic.Int32

	// Owned by the actor.
	deadline    time.Time // end of the settle time, once the caller waits
	dslot       uint16    // its slot in the shard's busy counts
	preAttempt  uint16
	where       where
	waited      bool // the request was parked at some point
	expired     bool // an owner whose unrenewed lease ended: the shard let go of it
	quiet       bool // an owner storing its result itself asked for no more renewals (Set.Quiet)
	pre         bool
	preGranted  bool
	preTakeover bool
	dropsBusy   bool
}

// preAt is the clock's reading just before a direct owner's claim, kept in
// deadline: a direct owner waits for no one, so it has no settle deadline.
func (r *Request) preAt() time.Time { return r.deadline }

// forever is a Settle that never runs out by itself.
const forever = time.Duration(1<<63 - 1)

type where uint8

const (
	nowhere  where = iota // not (or no longer) known to an entry
	parked                // in entry.waiters
	claiming              // entry.owner while claiming: the candidate
	owning                // entry.owner after a Grant
	gone                  // the caller left; answers are dropped
)

// canceler stops an owner's run with a cause (see Request.SetCanceler).
type canceler interface {
	CancelRun(cause error)
}

// SetCanceler publishes what stops the owner's run: its CancelRun(cause).
// If the actor has already asked the run to stop, it is stopped at once.
func (r *Request) SetCanceler(c interface{ CancelRun(cause error) }) {
	r.canceler = c
	r.cancelSet.Store(true)
	if cause := r.lost.Load(); cause != nil {
		c.CancelRun(*cause)
	}
}

// stop cancels the owner's run with cause (from the actor).
func (r *Request) stop(cause error) {
	r.lost.CompareAndSwap(nil, &cause)
	if r.cancelSet.Load() {
		r.canceler.CancelRun(cause)
	}
}

// Kind says what a Reply carries or how an owner's run ended (Finish).
type Kind uint8

// Kinds of Reply.
const (
	// Grant: the caller owns the key; it runs its function and sends Finish.
	Grant Kind = iota + 1
	// Settled: the key's result (Result); for the owner, the answer to its
	// Finish once the store acknowledged the record.
	Settled
	// FailConflict: the key is in progress and the caller may not (or may no
	// longer) wait. LeaseLeft tells how long the holder's lease has left, if
	// known.
	FailConflict
	// FailMismatch: the holder's fingerprint differs from the caller's.
	FailMismatch
	// FailClosed: the runtime is closing.
	FailClosed
	// FailStore: a store operation failed; Op names it and Err is the cause.
	FailStore
	// FailLeaseLost: the owner's claim was taken over.
	FailLeaseLost
	// FailOwner: the owner's own error, given back to it after the release
	// (transient), or a panic given to the owner and its waiters.
	FailOwner
	// FailOverloaded: the key has as many callers waiting as
	// Config.MaxWaiters allows.
	FailOverloaded
)

// Kinds of Finish.
const (
	// Success: Record holds the encoded value.
	Success Kind = iota + 16
	// Permanent: Record holds the error to store and replay.
	Permanent
	// Transient: nothing is stored; the claim is released and one waiter,
	// if any, claims the key afresh.
	Transient
	// Panic: the claim is released and Err goes to the owner and to every
	// waiter.
	Panic
)

// Reply is a shard's answer to a Request.
type Reply struct {
	Kind Kind
	Op   store.OpKind // a store failure's operation
	// Grant: the claim the store gave the owner: whether it took the key
	// over from an owner whose lease had ended, its attempt (the store's
	// store.ClaimResult.Attempt: the claims of the key since its record was
	// created, 1 for the first, one more per takeover, 1 again after a
	// release, a Forget or an expiry; 0 from a store that does not count
	// them), and its token. (The fields are ordered to keep a Reply small:
	// callers hold it in frames a small goroutine stack must fit.)
	Takeover  bool
	Joined    bool   // Settled: the caller waited for an execution in flight
	Waited    bool   // the request was parked before this reply
	Attempt   uint16 // Grant; at most 65535 (a larger attempt reads as 65535)
	Token     store.Token
	Result    *Cached       // Settled
	Err       error         // a failure's cause
	LeaseLeft time.Duration // FailConflict; Grant: the lease granted
}

// Finish is sent by an owner when its function has returned.
type Finish struct {
	Req    *Request
	Kind   Kind
	Record store.Record // Success, Permanent
	Value  any          // Success: the value itself, for callers in this process
	// OwnCodec: Record.Value was encoded with a codec of the caller's own,
	// not the default: the LRU keeps that encoding (see Cached.one).
	OwnCodec bool
	Err      error // Permanent, Transient, Panic

	// Stored is set when the owner completed the key in the store itself
	// (see store.OwnerCompleter) and does not wait for an answer: Result is
	// what the store kept, or StoreErr why it refused.
	Stored   bool
	Result   *Cached
	StoreErr error
	// Own is room for a Result inside the request, so that a key without
	// waiters settles without allocating one: the owner's own result, or,
	// for a caller the shard answers from its LRU, the cached record. The
	// caller reads it before it releases the request, and the shard copies
	// it for anyone else (the LRU keeps records by value).
	Own Cached
}

// Cached is a validated terminal record: what the LRU holds and what
// callers receive when a key settles.
type Cached struct {
	Record store.Record
	// Value and Err are the owner's own value or permanent error, when the
	// record was produced in this process; nil otherwise.
	Value any
	Err   error
	// Size is what the result holds in bytes: its encoded value (whether
	// or not the copy kept holds it), error text, fingerprint and owner.
	Size int
}

// size counts the bytes c holds, or held encoded (see Size).
func (c *Cached) size() int {
	r := &c.Record
	return len(r.Value) + len(r.Error) + len(r.Fingerprint) + len(r.Token.Owner)
}

// one returns the copy of c the LRU keeps: one copy of the result, never
// two. A result made here with the default codec keeps the owner's value
// and drops its encoding (a caller of another type encodes the value again
// with the default codec, as the owner did); any other result keeps its
// encoding (read from the store, or made with a codec of the owner's own,
// ownCodec), which a caller of another type decodes as the store's.
func (c *Cached) one(ownCodec bool) Cached {
	k := *c
	if k.Value != nil && !ownCodec {
		k.Record.Value = nil
	}
	return k
}

// abandon tells the shard that a caller stopped waiting.
type abandon struct{ req *Request }

// quiet tells the shard that an owner stores its result itself (Set.Quiet).
type quiet struct{ req *Request }

// forget asks the shard to delete a key's record.
type forget struct {
	key   string
	reply chan error
}

// batchDone carries a finished store batch back to the actor.
type batchDone struct {
	part *partition
	ops  []*op
}

// tick fires the shard's timers.
type tick struct{ gen uint64 }

// wake is a store wake-up for key ("" for all keys).
type wake struct{ key string }

// closing starts the shard's shutdown.
type closing struct{}

// requestMsg and finishMsg carry a *Request and a *Finish through the
// actor's mailbox. They are the same values under types of their own, so
// that the method protoactor looks for stays out of the exported types.
type (
	requestMsg Request
	finishMsg  Finish
)

// IgnoreDeadLetterLogging tells protoactor not to log the message as a dead
// letter. Every message of a shard opts out: the ones that arrive after a
// shard stopped are expected, and protoactor's dead-letter throttle would
// otherwise start a goroutine.
func (*requestMsg) IgnoreDeadLetterLogging() {}
func (*finishMsg) IgnoreDeadLetterLogging()  {}
func (*abandon) IgnoreDeadLetterLogging()    {}
func (*quiet) IgnoreDeadLetterLogging()      {}
func (*forget) IgnoreDeadLetterLogging()     {}
func (*batchDone) IgnoreDeadLetterLogging()  {}
func (*tick) IgnoreDeadLetterLogging()       {}
func (*wake) IgnoreDeadLetterLogging()       {}
func (*closing) IgnoreDeadLetterLogging()    {}
