package idem

import (
	"context"
	"errors"
	"time"

	"github.com/idemrt/idem/actors"
	"github.com/idemrt/idem/internal/handoff"
	"github.com/idemrt/idem/internal/ownerhook"
	"github.com/idemrt/idem/store"
)

// Claim describes the claim a function runs under: which key, with which
// fencing token, and what came before it. [ClaimFrom] returns it inside
// the function.
type Claim struct {
	// Key is the idempotency key, as given to the call.
	Key string
	// Fence is the claim's fencing token: larger than that of every
	// earlier claim of the key, in every store, across Forget, expiry and
	// cleanup (see docs/semantics.md, "Fences"). A write downstream that
	// carries it (UPDATE ... WHERE fence < $1) is refused once a later
	// claim has written.
	Fence uint64
	// Attempt counts the claims of the key since its record was created:
	// 1 for the first; each takeover adds one. A release (a transient
	// failure), a Forget or the record's expiry starts a new record, and
	// the next claim is 1 again. It is 0 with a store of your own that does
	// not count claims (store.ClaimResult.Attempt).
	Attempt int
	// Takeover is true when this claim took the key from an owner whose
	// lease ended without a result: that owner's effects may have
	// happened, and the function may need to reconcile before acting.
	Takeover bool
}

// claimKey is the context key of a function's Claim.
type claimKey struct{}

// ClaimFrom returns the claim the function running under ctx holds: inside
// the function given to [Do] and every front end built on it (flows steps,
// command handlers, HTTP handlers through the request's context, message
// handlers, and the transactional forms of package pgtx). It reports false
// anywhere else.
//
// Two uses: pass Key and Fence downstream, as a provider's idempotency key
// or a fenced write, so that a second run of the function (after a crash
// between its effect and its stored result) is refused there; and, when
// Takeover is true, check what an earlier owner did before doing it again.
func ClaimFrom(ctx context.Context) (Claim, bool) {
	if ctx == nil {
		return Claim{}, false
	}
	c, ok := ctx.Value(claimKey{}).(Claim)
	return c, ok
}

func init() {
	ownerhook.Option = func(c ownerhook.Completer) any {
		return CallOption(func(o *callOptions) { o.completer = c })
	}
	ownerhook.StoreOf = func(rt any) store.Store {
		if r, ok := rt.(*Runtime); ok && r != nil {
			return r.store
		}
		return nil
	}
}

// completeBy has the call's Completer store the owner's result (see
// ownerhook), and answers the owner as completeHere does.
func (o *owner[T]) completeBy(f *actors.Finish) {
	req := o.req
	o.rt.set.Quiet(req)
	hold := max(req.Lease/2, time.Millisecond)
	rec, err := o.completer.Complete(o.claim.token, f.Record, req.TTL, hold)
	var rep actors.Reply
	switch {
	case errors.Is(err, ownerhook.ErrByStore):
		// The shard completes the key as for any owner, and answers it:
		// a result the store would accept is kept until it does.
		o.rt.set.Finish(f)
		return
	case err == nil:
		f.Stored = true
		f.Own = actors.Cached{Record: rec, Value: f.Value, Err: f.Err}
		f.Result = &f.Own
		rep = actors.Reply{Kind: actors.Settled, Result: f.Result}
	case errors.Is(err, store.ErrLeaseLost):
		f.Stored, f.StoreErr = true, err
		rep = actors.Reply{Kind: actors.FailLeaseLost, Op: store.OpComplete, Err: err}
	default:
		// Nothing was stored, and the function's work did not commit: as
		// a transient failure, the shard releases the key and answers the
		// owner with err.
		f.Kind, f.Err, f.Record, f.Value, f.OwnCodec = actors.Transient, err, store.Record{}, nil, false
		o.rt.set.Finish(f)
		return
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
