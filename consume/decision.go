package consume

import (
	"time"

	"github.com/idemrt/idem"
)

// Decision is what a consumer tells the broker about one delivery.
type Decision uint8

// The decisions. The zero Decision is none of them: an adapter given one
// must not acknowledge the message.
const (
	// Ack: the message is done (run now, or replayed); acknowledge it.
	Ack Decision = iota + 1
	// Retry: leave the message to the broker to redeliver after
	// Verdict.Delay (a negative acknowledgement with a delay).
	Retry
	// Term: give the message up; the broker must not redeliver it
	// (terminate it, or move it to a dead-letter queue of your own).
	Term
)

// String returns the decision's name: "ack", "retry", "term", or "none".
func (d Decision) String() string {
	switch d {
	case Ack:
		return "ack"
	case Retry:
		return "retry"
	case Term:
		return "term"
	}
	return "none"
}

// Delivery is one delivery of a message, as the adapter describes it.
type Delivery struct {
	// Scope is where the message's key is unique: the stream or topic and
	// the consumer group, say. Deliveries in two scopes never share a key.
	Scope string
	// Key is the message's key within its scope: its message id, or what
	// the adapter's key function made of it. "" means the message has no
	// key (see Options.MissingKey).
	Key string
	// Attempt is the delivery's number: 1 for the first delivery, 2 for
	// the first redelivery, and so on. It grows the retry delay of
	// transient errors. Values below 1 count as 1.
	Attempt int
	// Fingerprint, if not nil, ties the key to the message's content (a
	// digest of its payload): a delivery whose key was used with another
	// fingerprint is given up with idem.ErrFingerprintMismatch instead of
	// replaying another message's result. Optional.
	Fingerprint []byte
}

// Verdict is the decision about one delivery and why it was made.
type Verdict struct {
	Decision Decision
	// Delay is how long the broker should wait before redelivering the
	// message (Retry only). A Retry from Handle always has a delay of at
	// least Options.MinDelay.
	Delay time.Duration
	// Err is the handler's error (transient or permanent; a replayed
	// permanent error is an *idem.ReplayedError outside the process that
	// stored it), or why the message could not be handled (no key, a
	// conflict, a store failure, the context ending). Nil with Ack, but
	// for a stored result that no longer decodes into the handler's type
	// (an *idem.CodecError, Op "decode"): the effect happened and the
	// result is stored, so the message is acknowledged, and a warning is
	// logged.
	Err error
	// Outcome says how idem answered: Executed (the handler ran in this
	// delivery), Joined (this delivery waited for a run in flight),
	// Replayed (the result was stored already), or idem.NoOutcome when
	// idem gave no result.
	Outcome idem.Outcome
	// Key is the idem key of the delivery (see [Key]), also when it was
	// not run; "" when the delivery had no usable key.
	Key string
}

// Replayed reports whether the delivery got a result, or a permanent
// error, that another delivery produced: a duplicate.
func (v Verdict) Replayed() bool {
	return v.Outcome == idem.Replayed || v.Outcome == idem.Joined
}
