package consume

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store"
)

// keyPrefix starts every key built by [Key].
const keyPrefix = "consume:"

// Key returns the idem key of a message key in a scope:
//
//	consume:<scope>:<key>
//
// with '%' written %25 and ':' written %3A in the scope, so that no two
// (scope, key) pairs give the same key. Use it with the runtime's Get,
// State or Forget to reach what a message stored (Forget makes it run again
// on its next delivery). The key must not be empty; the result must be a
// valid idem key (at most store.MaxKeyLen bytes, no NUL), else the error
// matches idem.ErrInvalidKey.
func Key(scope, key string) (string, error) {
	if key == "" {
		return "", ErrNoKey
	}
	k := keyPrefix + store.EscapeSegment(scope) + ":" + key
	if err := store.ValidateKey(k); err != nil {
		return "", err
	}
	return k, nil
}

// Handle runs fn once for the delivery's key through the consumer's runtime
// and returns the decision for the broker (see the package documentation
// for the table). fn runs under a context that keeps ctx's values but not
// its cancellation (see idem.Do); when ctx ends first, Handle returns a
// Retry with no delay at once, and fn goes on and stores its result for the
// next delivery to replay.
//
// The value fn returns is stored (encoded by the runtime's codec, JSON by
// default) and given back to duplicates: the first return value of Handle.
// Handle never panics on bad input: a nil consumer or fn is a Retry with an
// error matching idem.ErrInvalidArgument (the message is kept for a fixed
// deployment).
func Handle[T any](ctx context.Context, c *Consumer, d Delivery, fn func(context.Context) (T, error)) (T, Verdict) {
	var zero T
	switch {
	case c == nil:
		return zero, Verdict{Decision: Retry, Delay: DefaultMaxDelay,
			Err: fmt.Errorf("%w: consume.Handle with a nil *Consumer", idem.ErrInvalidArgument)}
	case fn == nil:
		return zero, Verdict{Decision: Retry, Delay: c.o.MaxDelay,
			Err: fmt.Errorf("%w: consume.Handle with a nil function", idem.ErrInvalidArgument)}
	}
	key, err := Key(d.Scope, d.Key)
	if err != nil {
		return zero, c.unkeyed(d, err)
	}
	if err := ctx.Err(); err != nil {
		return zero, Verdict{Decision: Retry, Err: err, Key: key}
	}
	var out idem.Outcome
	opts := make([]idem.CallOption, 0, 3+len(c.o.CallOptions))
	opts = append(opts, idem.WithSettle(c.o.Settle), idem.WithOutcome(&out))
	if d.Fingerprint != nil {
		opts = append(opts, idem.WithFingerprint(d.Fingerprint))
	}
	opts = append(opts, c.o.CallOptions...)
	v, err := idem.Do(ctx, c.o.Runtime, key, fn, opts...)
	vd := c.decide(ctx, key, d.Attempt, err)
	vd.Outcome = out
	return v, vd
}

// unkeyed is the verdict of a delivery whose key is missing or invalid.
func (c *Consumer) unkeyed(d Delivery, err error) Verdict {
	vd := Verdict{Decision: Term, Err: err}
	if errors.Is(err, ErrNoKey) && c.o.MissingKey == Retry {
		vd.Decision, vd.Delay = Retry, c.o.MaxDelay
	}
	c.o.Logger.Warn("consume: a message cannot be keyed, so it is not run",
		"scope", d.Scope, "attempt", d.Attempt, "decision", vd.Decision.String(), "reason", err.Error())
	return vd
}

// decide maps the error of idem.Do (err) for key at attempt to a verdict.
func (c *Consumer) decide(ctx context.Context, key string, attempt int, err error) Verdict {
	vd := Verdict{Err: err, Key: key}
	var conflict *idem.ConflictError
	switch {
	case err == nil:
		vd.Decision = Ack
	case idem.IsPermanent(err),
		errors.Is(err, idem.ErrFingerprintMismatch),
		errors.Is(err, idem.ErrInvalidKey):
		// Stored (or never storable): a redelivery would end the same.
		vd.Decision = Term
	case ctx.Err() != nil && errors.Is(err, ctx.Err()),
		errors.Is(err, idem.ErrClosed):
		// Shutting down: give the message back at once, to the next
		// consumer; whatever ran stores its result for it.
		vd.Decision = Retry
	case errors.As(err, &conflict):
		vd.Decision, vd.Delay = Retry, c.heldDelay(ctx, key, conflict)
	default:
		vd.Decision, vd.Delay = Retry, c.backoff(attempt)
	}
	return vd
}

// heldDelay is how long to wait before redelivering a message whose key a
// run elsewhere holds: what the holder's lease has left, as the conflict
// says or else as the store says; a live holder settles by then or renews
// its lease (and the next delivery waits again), a dead one's lease has
// ended and the next delivery takes the key over.
func (c *Consumer) heldDelay(ctx context.Context, key string, conflict *idem.ConflictError) time.Duration {
	left := conflict.LeaseLeft
	if left <= 0 && ctx.Err() == nil {
		if st, err := c.o.Runtime.State(ctx, key); err == nil && st.Status == idem.KeyInProgress {
			left = st.LeaseLeft
		}
	}
	return c.clamp(left)
}
