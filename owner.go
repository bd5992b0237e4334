package idem

// The owner of a key: the call that was granted it runs the function, and
// hands the shard its outcome however the function ends.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/idemrt/idem/actors"
	"github.com/idemrt/idem/internal/handoff"
	"github.com/idemrt/idem/internal/ownerhook"
	"github.com/idemrt/idem/store"
)

// owner is a call that was granted its key: what it needs to run fn and
// hand the shard the outcome. It holds only the call options it uses, so
// that it stays small: every execution allocates one.
type owner[T any] struct {
	rt         *Runtime
	req        *actors.Request
	claim      claim // what the store's grant said of the claim
	fn         func(context.Context) (T, error)
	fp         []byte
	codec      Codec
	classifier func(error) bool
	completer  ownerhook.Completer // stores the result in place of the store (package pgtx)
	waits      bool                // WithOwnerWaits
	apart      bool                // fn runs on a goroutine of its own
	answered   bool                // the shard answered the Finish: the caller may release req
	// enc holds the encoded result while an in-process store copies it.
	enc *encoded
	// rc is fn's context, kept here so that it costs no allocation of its
	// own.
	rc runCtx
}

// claim is what the store said of an owner's claim when it granted it.
type claim struct {
	token    store.Token // its fencing token and owner
	attempt  int         // the store's attempt: 1 for the claim that created the key's record, one more per takeover
	takeover bool        // taken over from an owner whose lease had ended
}

// execute runs fn as the key's owner, hands the outcome to the shard and
// returns the shard's answer once the store has it. st, when not nil,
// receives the time from the grant to that answer.
func (o *owner[T]) execute(ctx context.Context, st *callStats) (T, Outcome, error) {
	if st != nil {
		granted := time.Now()
		defer func() { st.run = time.Since(granted) }()
	}
	o.rc.init(ctx, o.rt)
	o.rc.claim = &o.claim
	o.rc.key = o.req.Key
	o.req.SetCanceler(&o.rc)
	if ctx.Done() == nil || o.waits {
		// Nothing can cancel this caller (or it asked to stay): run fn on
		// its own goroutine.
		o.run()
	} else {
		// Run fn apart, so that Do can return when ctx ends while fn goes
		// on for the callers waiting for it.
		o.apart = true
		handoff.Note(handoff.Run)
		go o.run()
	}
	var zero T
	rep, err := o.rt.wait(ctx, o.req, false)
	if err != nil {
		// fn may still run and send its Finish: req stays as it is.
		return zero, Executed, err
	}
	o.answered = true
	if rep.Kind == actors.Settled {
		v, err := result[T](o.req.Key, o.fp, o.codec, rep.Result)
		return v, Executed, err
	}
	return zero, Executed, failure(o.req.Key, rep)
}

// run calls fn and sends the shard a Finish however fn ends: a value, an
// error, a panic, or runtime.Goexit (t.FailNow in a test).
//
// With a store that lets owners complete (store.OwnerCompleter), a result to keep (a value or a permanent error)
// is completed here, on the owner's goroutine, and the owner's answer goes
// straight into its reply channel; the Finish then only tells the shard.
func (o *owner[T]) run() {
	f := &o.req.Finish
	f.Req = o.req
	returned := false
	defer func() {
		o.rc.CancelRun(nil)
		if returned && (f.Kind == actors.Success || f.Kind == actors.Permanent) {
			switch {
			case o.completer != nil:
				o.completeBy(f)
				return
			case o.rt.ownerCompletes:
				o.completeHere(f)
				return
			}
		}
		if !returned {
			if p := recover(); p != nil {
				f.Kind = actors.Panic
				f.Err = &PanicError{Key: o.req.Key, Value: p, Stack: debug.Stack()}
			} else {
				f.Kind = actors.Transient
				f.Err = fmt.Errorf("idem: %s: function called runtime.Goexit", describeKey(o.req.Key))
			}
		}
		o.rt.set.Finish(f)
	}()
	v, err := o.fn(&o.rc)
	o.fill(f, v, withCause(&o.rc, err))
	returned = true
}

// withCause adds to err, when fn stopped because the runtime stopped it
// (its context ended), why the runtime did.
func withCause(ctx context.Context, err error) error {
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		if cause := context.Cause(ctx); cause != nil && cause != ctx.Err() {
			return fmt.Errorf("%w (%w)", cause, err)
		}
	}
	return err
}

// fill writes into f how fn ended, with v and err: a value to store, a
// permanent error to store (marked, or by the classifier, or a value the
// codec cannot encode), or a transient error.
func (o *owner[T]) fill(f *actors.Finish, v T, err error) {
	fp := o.fp
	switch {
	case err == nil:
		boxed := any(v) // once: the codec and the shard's callers share it
		data, enc, encErr := encode(o.codec, boxed, o.copiedByStore())
		o.enc = enc
		if most := o.rt.opts.MaxResultBytes; encErr == nil && len(data) > most {
			if enc != nil {
				enc.release()
				o.enc = nil
			}
			encErr = fmt.Errorf("%w: %d bytes encoded, over the %d-byte limit (%s)", ErrResultTooLarge, len(data), most, o.rt.resultLimit)
		}
		if encErr != nil {
			// Kept as the permanent error it is, as every other process
			// replays it: IsPermanent is true for the owner and its
			// waiters too, and errors.As finds the *CodecError everywhere
			// (it has a code of its own: see codecErrorCode).
			codecErr := &CodecError{Key: o.req.Key, Op: "encode", Err: encErr}
			f.Kind, f.Err = actors.Permanent, Permanent(codecErr)
			f.Record = failedRecord(codecErr, fp)
			return
		}
		f.Kind, f.Value, f.OwnCodec = actors.Success, boxed, o.codec != JSON
		f.Record.Value, f.Record.Fingerprint = data, fp
	case IsPermanent(err):
		f.Kind, f.Err = actors.Permanent, err
		f.Record = failedRecord(err, fp)
	case o.classifier != nil && o.classifier(err):
		// Classified permanent: mark it, so that IsPermanent says so to the
		// owner and the waiters as it will to later replays.
		f.Kind, f.Err = actors.Permanent, Permanent(err)
		f.Record = failedRecord(err, fp)
	default:
		f.Kind, f.Err = actors.Transient, err
	}
}

// copiedByStore reports whether the owner completes its key in the store
// itself, so that fill may encode the value into a reused buffer: a store
// keeps its own copy of what it is given (see store.Store).
func (o *owner[T]) copiedByStore() bool { return o.rt.ownerCompletes && o.completer == nil }

// completeHere completes the key in an in-process store and answers the
// owner itself.
func (o *owner[T]) completeHere(f *actors.Finish) {
	req := o.req
	rec, err := o.rt.store.Complete(context.Background(), req.Key, o.claim.token, f.Record, req.TTL)
	if errors.Is(err, store.ErrTooLarge) {
		// The function ran: store the small permanent error in the
		// result's place, as the shard does for a batched Complete (see
		// Runtime.oversized), rather than release the key for a rerun.
		if o.enc != nil {
			o.enc.release()
			o.enc = nil
		}
		var perm error
		f.Record, perm = o.rt.oversized(req.Key, f.Record, err)
		f.Kind, f.Err, f.Value, f.OwnCodec = actors.Permanent, perm, nil, false
		rec, err = o.rt.store.Complete(context.Background(), req.Key, o.claim.token, f.Record, req.TTL)
	}
	f.Stored, f.StoreErr = true, err
	if o.enc != nil {
		// The store kept a copy; the shard may retry a refused Complete
		// from f.Record, which must own its bytes then.
		if err == nil {
			f.Record.Value = rec.Value
		} else {
			f.Record.Value = bytes.Clone(f.Record.Value)
		}
		o.enc.release()
		o.enc = nil
	}
	var rep actors.Reply
	if err == nil {
		f.Own = actors.Cached{Record: rec, Value: f.Value, Err: f.Err}
		f.Result = &f.Own
		rep = actors.Reply{Kind: actors.Settled, Result: f.Result}
	} else {
		code := actors.FailStore
		if errors.Is(err, store.ErrLeaseLost) {
			code = actors.FailLeaseLost
		}
		rep = actors.Reply{Kind: code, Op: store.OpComplete, Err: err}
	}
	o.rt.set.Finish(f)
	if o.apart {
		handoff.Note(handoff.OwnerAnswer)
	}
	select {
	case req.Reply <- rep:
	default: // the shard shut down and answered the owner already
	}
}

func failedRecord(err error, fp []byte) store.Record {
	return store.Record{Failed: true, Error: storedError(err), Fingerprint: fp}
}

// oversized is the small permanent record stored in place of a result the
// store refused for its size (store.ErrTooLarge), and the error its
// callers get: a *CodecError wrapping ErrResultTooLarge, as for a result
// over MaxResultBytes, so every instance replays the same error.
func (rt *Runtime) oversized(key string, refused store.Record, err error) (store.Record, error) {
	size := len(refused.Value)
	if refused.Failed {
		size = len(refused.Error)
	}
	codecErr := &CodecError{Key: key, Op: "encode", Err: fmt.Errorf("%w: the store refused its %d bytes (store.ErrTooLarge)", ErrResultTooLarge, size)}
	return failedRecord(codecErr, refused.Fingerprint), Permanent(codecErr)
}
