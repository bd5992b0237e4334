package idem

// Reading what the runtime holds for a key, without running anything: the
// result (Get) and the key's state (Runtime.State).

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemrt/idem/actors"
	"github.com/idemrt/idem/store"
)

// Get returns the stored result of key, decoded as T, without running
// anything and without claiming the key: what [Do] would replay. When the
// result is a permanent error, Get returns that error as Do would (the
// original in the owner's process while it is cached, else a
// [*ReplayedError]).
//
// Get reads this runtime's cache first, then the store. When there is no
// result it returns an error matching [ErrNotFound] (the key never ran,
// was forgotten or released, or its result expired), or [ErrInProgress]
// while a run holds the key, here or in another instance. A key this
// runtime has calls of in flight is in progress even before its claim
// reaches the store, as [Runtime.State] says (HeldHere). Telling a key in
// progress in another instance from an absent one needs a store that
// implements [store.Inspector] (memstore, redisstore and pgstore do); with any
// other store, Get answers ErrNotFound for it. Use [Runtime.State] for
// the details of a key.
//
// Options: [WithCodec] decodes the value (use the codec the result was
// stored with) and [WithFingerprint] refuses a result stored for another
// request with [ErrFingerprintMismatch], as Do does; so is a key in
// progress whose holder's fingerprint is known and differs, where Do would
// say so too. The other call options are about running and are ignored,
// so one list of options can serve both Do and Get; an option with a bad
// value is still refused. A store failure is a [*StoreError].
func Get[T any](ctx context.Context, rt *Runtime, key string, opts ...CallOption) (T, error) {
	var zero T
	if rt == nil {
		return zero, fmt.Errorf("%w: Get on a nil *Runtime", ErrInvalidArgument)
	}
	c := rt.applyOptions(opts)
	if err := rt.refuse(ctx, key, c.err, false); err != nil {
		return zero, err
	}
	var hit actors.Cached
	if rt.set.Hit(key, rt.clock.Now(), &hit) {
		return result[T](key, c.fp, c.codec, &hit)
	}
	rec, err := rt.read(ctx, key, c.fp)
	if err != nil {
		return zero, err
	}
	return result[T](key, c.fp, c.codec, &actors.Cached{Record: rec})
}

// read returns key's completed record from the store, or why there is
// none: in progress (in the store, or in flight here), or not found. fp is
// the caller's fingerprint, checked against a holder's.
func (rt *Runtime) read(ctx context.Context, key string, fp []byte) (store.Record, error) {
	sctx, cancel := rt.storeContext(ctx)
	defer cancel()
	if in, ok := rt.store.(store.Inspector); ok {
		e, err := in.Inspect(sctx, key)
		if err != nil {
			return store.Record{}, rt.storeErr(ctx, key, "inspect", err)
		}
		switch e.State {
		case store.Done:
			return e.Record, nil
		case store.Held:
			return store.Record{}, inProgress(key, fp, e.Fingerprint)
		}
	} else {
		rec, err := rt.store.Get(sctx, key)
		switch {
		case err == nil:
			return rec, nil
		case !errors.Is(err, store.ErrNotFound):
			return store.Record{}, rt.storeErr(ctx, key, store.OpGet.String(), err)
		}
	}
	// Nothing in the store: a key this runtime has calls of in flight is
	// in progress all the same (its claim is on its way), as Do sees it.
	fl, ok, err := rt.inFlight(ctx, key)
	switch {
	case err != nil:
		return store.Record{}, err
	case ok:
		return store.Record{}, inProgress(key, fp, fl.Fingerprint)
	}
	return store.Record{}, keyErr(key, ErrNotFound)
}

// inFlight asks key's shard whether it has calls of key in flight.
func (rt *Runtime) inFlight(ctx context.Context, key string) (inFlight, bool, error) {
	fp, left, ok, err := rt.set.InFlight(ctx, key)
	if errors.Is(err, store.ErrClosed) {
		err = keyErr(key, ErrClosed)
	}
	return inFlight{Fingerprint: fp, LeaseLeft: left}, ok, err
}

// inFlight is what a shard knows of a key it has calls of in flight.
type inFlight struct {
	Fingerprint []byte
	LeaseLeft   time.Duration
}

// inProgress is Get's answer for a key a run holds: ErrInProgress, or
// ErrFingerprintMismatch when the caller's fingerprint and the holder's
// are both known and differ, as Do would answer.
func inProgress(key string, fp, holder []byte) error {
	if len(fp) > 0 && len(holder) > 0 && !bytes.Equal(fp, holder) {
		return keyErr(key, ErrFingerprintMismatch)
	}
	return keyErr(key, ErrInProgress)
}

// storeContext bounds a store call the runtime makes on a caller's behalf
// by StoreTimeout, as the shards bound theirs.
func (rt *Runtime) storeContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, rt.opts.StoreTimeout)
}

// storeErr turns the error of a store call made on a caller's behalf into
// the caller's error. ctx is the caller's: when it ended, its error is the
// answer; a store call that ran out of StoreTimeout is a store failure.
func (rt *Runtime) storeErr(ctx context.Context, key, op string, err error) error {
	switch {
	case errors.Is(err, store.ErrClosed):
		return keyErr(key, ErrClosed)
	case ctx.Err() != nil && errors.Is(err, ctx.Err()):
		return err
	case store.IsContract(err):
		return wrapf(err, "idem: %s: store %s", describeKey(key), op)
	}
	return &StoreError{Key: key, Op: op, Err: err}
}

// KeyStatus is where a key is in its lifecycle, as [Runtime.State] sees it.
type KeyStatus uint8

// The statuses of a key.
const (
	// KeyAbsent: nothing is stored for the key (never run, forgotten,
	// released, or expired).
	KeyAbsent KeyStatus = iota
	// KeyInProgress: a run holds the key under a lease.
	KeyInProgress
	// KeyCompleted: the key has a result, replayed until it expires.
	KeyCompleted
	// KeyFailed: the key's result is a permanent error, replayed until it
	// expires.
	KeyFailed
)

// String returns the status's name.
func (s KeyStatus) String() string {
	switch s {
	case KeyAbsent:
		return "absent"
	case KeyInProgress:
		return "in-progress"
	case KeyCompleted:
		return "completed"
	case KeyFailed:
		return "failed"
	}
	return "unknown"
}

// KeyState describes a key as the store holds it: the answer of
// [Runtime.State].
type KeyState struct {
	Key    string
	Status KeyStatus

	// LeaseLeft is how long the holder's lease has left (KeyInProgress);
	// zero when it has ended and nobody has taken the key over yet (its
	// holder most likely died: the next call takes it over).
	LeaseLeft time.Duration
	// HeldHere is true when the holder is this runtime (KeyInProgress),
	// or when the store holds nothing yet but this runtime has calls of
	// the key in flight (its claim is on its way; Token is then zero).
	HeldHere bool

	// Token is the claim that holds the key (KeyInProgress) or that stored
	// its result (KeyCompleted, KeyFailed): its fence and owner.
	Token store.Token
	// Fingerprint is the holder's, or the result's, request fingerprint
	// (see WithFingerprint); nil when none was given.
	Fingerprint []byte

	// CreatedAt and ExpiresAt are when the result was stored and when it
	// ends, by the store's clock (KeyCompleted, KeyFailed).
	CreatedAt, ExpiresAt time.Time
	// Size is the length of the encoded value (KeyCompleted).
	Size int

	// Error is the permanent error's message, and ErrorCode its registered
	// code, if any (KeyFailed; see RegisterError).
	Error, ErrorCode string
}

// State returns what the store holds for key: absent, in progress (with
// the lease left and whether this runtime holds it), completed or failed
// permanently (with the record's times, fingerprint and token). It reads
// the store, not this runtime's cache, and decodes no value. A key the
// store does not hold but this runtime has calls of in flight (its claim
// not in the store yet) is in progress and HeldHere, as [Get] sees it.
//
// It needs a store that implements [store.Inspector] (memstore and
// redisstore do); with any other store it returns an error matching
// errors.ErrUnsupported. A store failure is a [*StoreError].
func (rt *Runtime) State(ctx context.Context, key string) (KeyState, error) {
	if err := rt.refuse(ctx, key, nil, false); err != nil {
		return KeyState{}, err
	}
	in, ok := rt.store.(store.Inspector)
	if !ok {
		return KeyState{}, fmt.Errorf("idem: State: the store (%T) does not implement store.Inspector: %w", rt.store, errors.ErrUnsupported)
	}
	sctx, cancel := rt.storeContext(ctx)
	defer cancel()
	e, err := in.Inspect(sctx, key)
	if err != nil {
		return KeyState{}, rt.storeErr(ctx, key, "inspect", err)
	}
	st := KeyState{Key: key, Token: e.Token}
	switch e.State {
	case store.Absent:
		fl, ok, err := rt.inFlight(ctx, key)
		if err != nil {
			return KeyState{}, err
		}
		if ok {
			st.Status, st.HeldHere = KeyInProgress, true
			st.LeaseLeft, st.Fingerprint = fl.LeaseLeft, fl.Fingerprint
		}
	case store.Held:
		st.Status = KeyInProgress
		st.LeaseLeft = e.LeaseLeft
		st.HeldHere = rt.set.Owns(e.Token.Owner)
		st.Fingerprint = e.Fingerprint
	case store.Done:
		rec := &e.Record
		st.Status = KeyCompleted
		if st.Token.IsZero() {
			st.Token = rec.Token
		}
		st.Fingerprint = rec.Fingerprint
		st.CreatedAt, st.ExpiresAt = rec.CreatedAt, rec.ExpiresAt
		st.Size = len(rec.Value)
		if rec.Failed {
			st.Status, st.Size = KeyFailed, 0
			st.Error, st.ErrorCode, _ = parseStoredError(rec.Error)
		}
	}
	return st, nil
}
