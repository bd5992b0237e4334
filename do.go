package idem

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/idemrt/idem/actors"
	"github.com/idemrt/idem/store"
)

// Do runs fn once for key and returns its result to every caller of key.
//
//   - The first caller executes fn. Callers that arrive while it runs wait
//     (up to the settle time, see WithSettle) and get the same result, or the
//     same permanent error, the moment it is stored.
//   - Callers that arrive later get the stored result without running
//     anything, until it expires (WithTTL).
//   - If fn fails with an error that is not permanent (see [Permanent]),
//     nothing is stored: the caller gets its error, and one waiting caller,
//     if any, is handed the key and runs fn in turn.
//   - If fn panics, its caller and every waiting caller get a [*PanicError]
//     and the key is released.
//
// fn runs under a context that keeps ctx's values and deadline but not its
// cancellation: one caller giving up does not stop work others wait for. If
// ctx is cancelled while fn runs, Do returns ctx.Err() at once, and fn goes
// on and stores its result for the next call. fn's context is cancelled if
// the key's lease is lost or the runtime closes.
//
// Results are encoded with the codec (JSON by default) for the store; callers
// in this process receive the owner's value itself, shared between them, so
// treat it as read-only.
//
// Available options: [WithPolicy], [WithSettle], [WithFailFast],
// [WithLease], [WithoutRenewal], [WithTTL], [WithClassifier],
// [WithFingerprint], [WithCodec], [WithOutcome], [WithOwnerWaits].
func Do[T any](ctx context.Context, rt *Runtime, key string, fn func(context.Context) (T, error), opts ...CallOption) (T, error) {
	if rt == nil {
		var zero T
		return zero, fmt.Errorf("%w: Do on a nil *Runtime", ErrInvalidArgument)
	}
	if len(opts) == 0 && !rt.observing {
		v, _, err := do(ctx, rt, key, fn, &rt.defaults, nil)
		return v, err
	}
	return doWithOptions(ctx, rt, key, fn, opts)
}

// doWithOptions applies opts first. (Apart from Do, so that a call without
// options does not move its options to the heap.)
func doWithOptions[T any](ctx context.Context, rt *Runtime, key string, fn func(context.Context) (T, error), opts []CallOption) (T, error) {
	c := rt.applyOptions(opts)
	var v T
	var out Outcome
	var err error
	if rt.observing {
		v, out, err = observed(ctx, rt, key, fn, c)
	} else {
		v, out, err = do(ctx, rt, key, fn, &c, nil)
	}
	if c.outcome != nil {
		*c.outcome = out
	}
	return v, err
}

// optionScratch holds the callOptions that CallOptions are applied to: a
// pointer handed to an option escapes, so each call with options would
// allocate its own.
var optionScratch = sync.Pool{New: func() any { return new(callOptions) }}

// applyOptions returns rt's defaults with opts applied.
func (rt *Runtime) applyOptions(opts []CallOption) callOptions {
	p := optionScratch.Get().(*callOptions)
	*p = rt.defaults
	for _, o := range opts {
		if o != nil {
			o(p)
		}
	}
	c := *p
	*p = callOptions{} // keep no fingerprint or outcome pointer alive
	optionScratch.Put(p)
	return c
}

// do is one call of Do: refuse it, or replay the LRU's record, or admit it,
// send it to the key's shard and act on the answer (run fn as the owner, or
// take the settled record, or fail). st, when not nil, receives the call's
// timings (an observed call).
//
// c is only read (a call without options passes the runtime's defaults).
// Nothing keeps it, so it stays where the caller has it, and do's frame
// stays small: a call's goroutine often starts with a small stack, and
// growing it costs more than the call (see replay).
func do[T any](ctx context.Context, rt *Runtime, key string, fn func(context.Context) (T, error), c *callOptions, st *callStats) (T, Outcome, error) {
	var zero T
	if err := rt.refuse(ctx, key, c.err, fn == nil); err != nil {
		return zero, NoOutcome, err
	}
	if v, ok, err := replay[T](rt, key, c.fp, c.codec); ok {
		return v, settledOutcome(Replayed, err), err
	}
	req := newRequest(key, c)
	// A call made from inside a function this runtime runs is part of a call
	// already admitted: refusing it would fail the run that holds the slot.
	nested, _ := ctx.Value(nestedKey{}).(*Runtime)
	req.NoAdmit = nested == rt
	// With memstore the call may claim its key itself and own it without
	// waiting for the shard (see actors.Request.Direct): it completes the
	// key itself anyway. Not when the result is stored by another hand.
	req.Direct = rt.ownerCompletes && c.completer == nil
	if st != nil {
		st.sent = time.Now()
	}
	if err := rt.set.Send(req); err != nil {
		req.Release()
		if errors.Is(err, actors.ErrOverloaded) {
			rt.warnOverload(key)
			return zero, NoOutcome, keyErr(key, ErrOverloaded)
		}
		return zero, NoOutcome, keyErr(key, ErrClosed)
	}
	if !req.NoAdmit {
		defer rt.set.Leave(key)
	}
	rep, err := rt.wait(ctx, req, true)
	if err != nil {
		st.noteLeft()
		return zero, NoOutcome, err
	}
	st.noteReply(rep)
	switch rep.Kind {
	case actors.Grant:
		return own(ctx, rt, req, &rep, fn, c, st)
	case actors.Settled:
		out := Replayed
		if rep.Joined {
			out = Joined
		}
		v, err := result[T](key, c.fp, c.codec, rep.Result)
		req.Release() // after result: rep.Result may live in req
		return v, settledOutcome(out, err), err
	default:
		req.Release()
		return zero, NoOutcome, failure(key, rep)
	}
}

// replay returns the LRU's record of key as the caller's answer, if it
// holds one. (Apart from do, and not inlined, so that the record's copy
// takes no room in do's frame: a call's goroutine often starts with a
// small stack, and growing it costs more than the call.)
//
//go:noinline
func replay[T any](rt *Runtime, key string, fp []byte, codec Codec) (T, bool, error) {
	var hit actors.Cached
	if !rt.set.Hit(key, rt.clock.Now(), &hit) {
		var zero T
		return zero, false, nil
	}
	v, err := result[T](key, fp, codec, &hit)
	return v, true, err
}

// own runs fn as the owner of the key req was granted, and releases req
// when the shard is done answering it. (Apart from do, for do's frame: see
// replay.)
//
//go:noinline
func own[T any](ctx context.Context, rt *Runtime, req *actors.Request, grant *actors.Reply,
	fn func(context.Context) (T, error), c *callOptions, st *callStats) (T, Outcome, error) {
	// The owner lives on the heap: a goroutine may run fn.
	o := &owner[T]{rt: rt, req: req, fn: fn,
		claim: claim{token: grant.Token, attempt: int(grant.Attempt), takeover: grant.Takeover},
		fp:    c.fp, codec: c.codec, classifier: c.classifier, waits: c.ownerWaits, completer: c.completer}
	v, out, err := o.execute(ctx, st)
	if o.answered {
		req.Release()
	}
	return v, out, err
}

// refuse returns why a call may not start, if it may not: an invalid option
// (optErr), no function, an invalid key, a closed runtime, or a context
// already done.
func (rt *Runtime) refuse(ctx context.Context, key string, optErr error, nilFunc bool) error {
	switch {
	case optErr != nil:
		return optErr
	case nilFunc:
		return fmt.Errorf("%w: Do with a nil function", ErrInvalidArgument)
	}
	if err := store.ValidateKey(key); err != nil {
		return err
	}
	if rt.closed.Load() {
		return keyErr(key, ErrClosed)
	}
	return ctx.Err()
}

// newRequest returns the shard request of a call of key with options c,
// from the shard's pool: the caller releases it once it has its final
// reply (never after it told the shard it left, see wait).
func newRequest(key string, c *callOptions) *actors.Request {
	r := actors.NewRequest()
	r.Key = key
	r.Fingerprint = c.fp
	r.Lease, r.TTL, r.Settle = c.lease, c.ttl, c.settle
	if c.failFast {
		r.Settle = 0 // the shard's "do not wait"
	} else if c.settle >= store.MaxDuration {
		// The longest settle time there is (100 years) arms no timer: the
		// caller waits as long as its context lets it.
		r.Settle = math.MaxInt64
	}
	r.NoRenew = c.noRenew
	return r
}

// settledOutcome is the outcome of a caller given a settled record: out,
// unless the record was not its to have (another request's fingerprint).
func settledOutcome(out Outcome, err error) Outcome {
	if err != nil && errors.Is(err, ErrFingerprintMismatch) {
		return NoOutcome
	}
	return out
}

// wait returns the shard's next reply to req. If ctx ends first and leave
// is set, the shard is told that the caller left.
//
// A caller waiting for its first reply needs nothing but its reply channel
// and its context: a request the shard accepted is always answered, even by
// a shard that is closing (see actors.Shard.Send). An owner waiting for the
// answer to its Finish also watches the runtime's shutdown (owner), since a
// forced Close can stop the shard before that Finish arrives.
func (rt *Runtime) wait(ctx context.Context, req *actors.Request, leave bool) (actors.Reply, error) {
	var stopped <-chan struct{}
	if !leave {
		stopped = rt.stopped
	} else if ctx.Done() == nil {
		// Nothing to watch but the reply: a plain receive wakes faster
		// than a select (a storm's waiters all pass here).
		return <-req.Reply, nil
	}
	select {
	case rep := <-req.Reply:
		return rep, nil
	case <-ctx.Done():
		select {
		case rep := <-req.Reply:
			if rep.Kind != actors.Grant {
				return rep, nil
			}
		default:
		}
		if leave {
			rt.set.Abandon(req)
		}
		return actors.Reply{}, ctx.Err()
	case <-stopped:
		// An owner that stored its result itself put the answer in Reply
		// and may find the shards stopped meanwhile (Close waited for its
		// Finish only): both cases are ready, and select picks either.
		select {
		case rep := <-req.Reply:
			return rep, nil
		default:
		}
		return actors.Reply{}, keyErr(req.Key, ErrClosed)
	}
}

// result turns a settled record into the caller's answer, checking the
// fingerprint first: no path replays another request's result.
func result[T any](key string, fp []byte, codec Codec, hit *actors.Cached) (T, error) {
	var zero T
	rec := &hit.Record
	if len(fp) > 0 && len(rec.Fingerprint) > 0 && !bytes.Equal(fp, rec.Fingerprint) {
		return zero, keyErr(key, ErrFingerprintMismatch)
	}
	if rec.Failed {
		if hit.Err != nil {
			return zero, hit.Err
		}
		return zero, replayedError(key, rec.Error)
	}
	data := rec.Value
	if hit.Value != nil {
		if v, ok := hit.Value.(T); ok {
			return v, nil
		}
		if data == nil {
			// The LRU keeps one copy of a result made here with the
			// default codec, the owner's value: a caller of another type
			// gets it encoded again as the owner did, and decoded with its
			// own codec, as from the store. (A result made with another
			// codec keeps its encoding: see actors.Cached.)
			var err error
			if data, err = JSON.Marshal(hit.Value); err != nil {
				return zero, &CodecError{Key: key, Op: "decode", Err: err}
			}
		}
	}
	var v T
	if err := codec.Unmarshal(data, &v); err != nil {
		return zero, &CodecError{Key: key, Op: "decode", Err: err}
	}
	return v, nil
}

// failure turns a shard's failure reply into the caller's error.
func failure(key string, rep actors.Reply) error {
	switch rep.Kind {
	case actors.FailConflict:
		return &ConflictError{Key: key, State: "in-progress", LeaseLeft: rep.LeaseLeft}
	case actors.FailMismatch:
		return keyErr(key, ErrFingerprintMismatch)
	case actors.FailClosed:
		return keyErr(key, ErrClosed)
	case actors.FailOverloaded:
		return keyErr(key, ErrOverloaded)
	case actors.FailLeaseLost:
		return keyErr(key, ErrLeaseLost)
	case actors.FailOwner:
		return rep.Err
	case actors.FailStore:
		if errors.Is(rep.Err, store.ErrFull) {
			return &wrappedTwo{msg: fmt.Sprintf("idem: %s: %s (%s)", describeKey(key), unprefixed(ErrOverloaded), unprefixed(rep.Err)),
				err: ErrOverloaded, cause: rep.Err}
		}
		if errors.Is(rep.Err, store.ErrTooLarge) {
			// The call's own arguments (its fingerprint) are over what the
			// store takes: sending it again fails the same way, so it is
			// no outage.
			return fmt.Errorf("idem: %s: %w: the store refused the %s for its size (%w)", describeKey(key), ErrInvalidArgument, rep.Op, rep.Err)
		}
		if store.IsContract(rep.Err) && !errors.Is(rep.Err, store.ErrLeaseLost) {
			return wrapf(rep.Err, "idem: %s: store %s", describeKey(key), rep.Op)
		}
		return &StoreError{Key: key, Op: rep.Op.String(), Err: rep.Err}
	}
	return keyErr(key, fmt.Errorf("unexpected reply %d", rep.Kind))
}
