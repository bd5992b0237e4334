package consume

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store"
)

// keyPrefix starts every key built by [Key]; digestMark follows the scope
// in the key of a message key that cannot be used as it is.
const (
	keyPrefix  = "consume:"
	digestMark = "%sha256:"
)

// Key returns the idem key of a message key in a scope:
//
//	consume:<scope>:<key>
//
// with '%' written %25 and ':' written %3A in the scope, so that no two
// (scope, key) pairs give the same key. A message key that would make the
// result too long for idem (over store.MaxKeyLen bytes) or that holds a NUL
// byte is replaced by the hex SHA-256 of it:
//
//	consume:<scope>%sha256:<64 hex digits>
//
// The escaped scope holds a '%' only before "25" or "3A", so no scope
// produces "%sha256": a digest key never equals the key of a plain message
// key, nor one of another scope.
//
// Use it with the runtime's Get, State or Forget to reach what a message
// stored (Forget makes it run again on its next delivery). An empty key is
// ErrNoKey; a scope too long (or holding a NUL byte) for even the digest
// key to be valid is an error matching idem.ErrInvalidKey.
func Key(scope, key string) (string, error) {
	if key == "" {
		return "", ErrNoKey
	}
	scope = store.EscapeSegment(scope)
	k := keyPrefix + scope + ":" + key
	if len(k) > store.MaxKeyLen || strings.IndexByte(key, 0) >= 0 {
		sum := sha256.Sum256([]byte(key))
		k = keyPrefix + scope + digestMark + hex.EncodeToString(sum[:])
	}
	if err := store.ValidateKey(k); err != nil {
		return "", err
	}
	return k, nil
}

// Handle runs fn once for the delivery's key through the consumer's runtime
// and returns the decision for the broker (see the package documentation
// for the table). fn runs under a context that keeps ctx's values but not
// its cancellation (see idem.Do); when ctx ends first, Handle returns
// without waiting for fn, with a Retry after the backoff of a transient
// error (never with no delay), and fn goes on and stores its result for
// the next delivery to replay.
//
// The value fn returns is stored (encoded by the runtime's codec, JSON by
// default) and given back to duplicates: the first return value of Handle.
// Handle never panics on bad input: a nil consumer, one not built by
// [New] (a zero Consumer), or a nil fn is a Retry with an error matching
// idem.ErrInvalidArgument (the message is kept for a fixed deployment),
// after DefaultMaxDelay (the consumer's MaxDelay for a nil fn), with
// Verdict.Key set when the delivery has a usable key. A nil ctx is taken
// for context.Background().
func Handle[T any](ctx context.Context, c *Consumer, d Delivery, fn func(context.Context) (T, error)) (T, Verdict) {
	return HandleWith(ctx, c, d, nil, fn)
}

// HandleWith is [Handle] with run making the call in place of idem.Do (a
// nil run is idem.Do): the delivery's handler runs in the form run gives
// it, such as a database transaction that commits with the key's record
// (see [Runner]). Everything else, the verdict above all, is Handle's.
func HandleWith[T any](ctx context.Context, c *Consumer, d Delivery, run Runner[T], fn func(context.Context) (T, error)) (T, Verdict) {
	var zero T
	if ctx == nil {
		ctx = context.Background()
	}
	key, err := Key(d.Scope, d.Key)
	switch {
	case c == nil || c.o.Runtime == nil:
		return zero, Verdict{Decision: Retry, Delay: DefaultMaxDelay, Key: key,
			Err: fmt.Errorf("%w: consume.Handle with a nil *Consumer or one not built by consume.New", idem.ErrInvalidArgument)}
	case fn == nil:
		return zero, Verdict{Decision: Retry, Delay: c.o.MaxDelay, Key: key,
			Err: fmt.Errorf("%w: consume.Handle with a nil function", idem.ErrInvalidArgument)}
	case err != nil:
		return zero, c.unkeyed(d, err)
	}
	if err := ctx.Err(); err != nil {
		return zero, Verdict{Decision: Retry, Delay: c.backoff(d.Attempt), Err: err, Key: key}
	}
	var out idem.Outcome
	opts := make([]idem.CallOption, 0, 3+len(c.o.CallOptions))
	opts = append(opts, idem.WithPolicy(c.o.Policy))
	if d.Fingerprint != nil {
		opts = append(opts, idem.WithFingerprint(d.Fingerprint))
	}
	// The consumer's WithOutcome goes last: one in CallOptions would
	// leave every verdict without its outcome.
	opts = append(opts, c.o.CallOptions...)
	opts = append(opts, idem.WithOutcome(&out))
	if run == nil {
		run = idem.Do[T]
	}
	v, err := run(ctx, c.o.Runtime, key, fn, opts...)
	vd := c.decide(ctx, key, d.Attempt, out, err)
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

// decide maps the outcome (out) and error of idem.Do for key at attempt to
// a verdict. A Term needs a result that idem stored (a permanent error) or
// an answer of idem's own that every redelivery would get again; an error
// that only looks like one (fn's own error wrapping an idem sentinel, a
// panic with a permanent error for its value) stored nothing and is
// retried.
func (c *Consumer) decide(ctx context.Context, key string, attempt int, out idem.Outcome, err error) Verdict {
	vd := Verdict{Err: err, Key: key}
	var (
		conflict *idem.ConflictError
		panicked *idem.PanicError
		codec    *idem.CodecError
	)
	switch {
	case err == nil:
		vd.Decision = Ack
	case errors.As(err, &panicked) && panicked.Key == key:
		// A bug, not an outcome: nothing is stored, whatever the value.
		vd.Decision, vd.Delay = Retry, c.backoff(attempt)
	case idem.IsPermanent(err):
		// Stored: a redelivery replays it.
		vd.Decision = Term
	case out == idem.NoOutcome && (errors.Is(err, idem.ErrFingerprintMismatch) || errors.Is(err, idem.ErrInvalidKey)):
		// idem's own answer about the key: a redelivery gets it again.
		vd.Decision = Term
	case (out == idem.Replayed || out == idem.Joined) && errors.As(err, &codec) && codec.Op == "decode":
		// The result is stored and the effect happened; only its value
		// no longer decodes (the handler's type changed). Retrying would
		// fail the same way until the TTL ends.
		vd.Decision = Ack
		c.o.Logger.Warn("consume: a stored result does not decode; the message is acknowledged",
			"key", key, "attempt", attempt, "reason", err.Error())
	case out == idem.NoOutcome && errors.As(err, &conflict):
		vd.Decision, vd.Delay = Retry, c.heldDelay(ctx, key, conflict)
	default:
		// A transient error, a store failure, an overloaded runtime, and
		// also a context that ended or a closed runtime (a consumer
		// shutting down): backoff, never at once, so that a consumer left
		// running on a closed runtime does not spin on its messages.
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
