package consume

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/idemrt/idem"
)

// Options configures a [Consumer]. Zero fields take the documented default;
// negative durations are errors.
type Options struct {
	// Runtime runs the handlers and stores their results. Required.
	Runtime *idem.Runtime

	// Policy is the consumer's idem policy. Its fields left zero are the
	// runtime's (idem.Options.Policy), but for Settle:
	//
	//   - Settle is how long a delivery waits for a run of the same key in
	//     flight (a duplicate arriving while the first is handled) before
	//     it gives the message back to the broker with a Retry. Keep it
	//     well under the broker's acknowledgement timeout unless the
	//     adapter keeps the message alive while it waits (natsjs and sqs
	//     do).
	//     Default: 5s (DefaultSettle), not the runtime's: a delivery that
	//     waits holds up the messages behind it, and the broker
	//     redelivers it anyway.
	//   - FailFast gives the duplicate back at once instead (a Retry after
	//     what the holder's lease has left). Setting Settle too is an
	//     error.
	//   - TTL is how long a message's result is replayed; Lease, NoRenewal
	//     and Classifier are as in idem.Policy.
	idem.Policy

	// MinDelay and MaxDelay bound every retry delay: the transient-error
	// backoff and the wait for a key held elsewhere. Set both, and MinDelay
	// must not be over MaxDelay. Set one only, and the default of the other
	// gives way to it: a MaxDelay under 100ms lowers MinDelay to MaxDelay,
	// a MinDelay over 30s raises MaxDelay to MinDelay.
	// Default: 100ms and 30s.
	MinDelay, MaxDelay time.Duration

	// Backoff returns the retry delay after a transient error at a
	// delivery attempt (1 for the first delivery); the answer is clamped to
	// [MinDelay, MaxDelay].
	// A Backoff that panics is taken for the default, and a warning is
	// logged at each such call.
	// Default: MinDelay doubled per attempt after the first
	// (MinDelay × 2^(attempt-1)), so up to MaxDelay.
	Backoff func(attempt int) time.Duration

	// MissingKey is the decision for a delivery without a key: Term (give
	// it up) or Retry (leave it to the broker, after MaxDelay, until a
	// deployment that can key it consumes it, or the broker's own delivery
	// limit ends it). A message is never run without a key. Every such
	// delivery is logged at warning level with the reason.
	// Default: Term.
	MissingKey Decision

	// CallOptions are added to every idem.Do call, after the consumer's own
	// (so they win over Policy too): idem.WithCodec, say. The one
	// exception is idem.WithOutcome: the
	// consumer's own comes last, so a WithOutcome here receives nothing;
	// read Verdict.Outcome instead.
	// Default: none.
	CallOptions []idem.CallOption

	// Logger receives the warnings about deliveries given up for want of a
	// key, and about stored results that no longer decode.
	// Default: slog.Default().
	Logger *slog.Logger
}

// Defaults of Options.
const (
	DefaultSettle   = 5 * time.Second
	DefaultMinDelay = 100 * time.Millisecond
	DefaultMaxDelay = 30 * time.Second
)

// ErrNoKey is the error of a delivery that has no key.
var ErrNoKey = errors.New("consume: the message has no key (no message id and no key function)")

// Consumer turns deliveries into decisions ([Handle]). It holds no
// goroutines and is safe for concurrent use; build it with [New].
type Consumer struct {
	o Options
}

// New returns a consumer with opts, or an error matching
// idem.ErrInvalidArgument for a nil runtime, a negative duration, FailFast
// with Settle, a MinDelay over a MaxDelay when both are set, or a
// MissingKey other than Term or Retry. When only one of MinDelay and MaxDelay is set, the
// default of the other is moved to it instead (see Options.MinDelay).
func New(opts Options) (*Consumer, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: consume.Options.%s", idem.ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	if opts.Runtime == nil {
		return nil, bad("Runtime is nil")
	}
	if err := opts.Policy.Validate("consume.Options"); err != nil {
		return nil, err
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"MinDelay", opts.MinDelay}, {"MaxDelay", opts.MaxDelay}} {
		if d.v < 0 {
			return nil, bad("%s is %v; it must not be negative (zero means the default)", d.name, d.v)
		}
	}
	switch opts.MissingKey {
	case 0, Term, Retry:
	default:
		return nil, bad("MissingKey is %v; it must be Term or Retry", opts.MissingKey)
	}
	if opts.MaxDelay != 0 && opts.MinDelay > opts.MaxDelay {
		return nil, bad("MinDelay (%v) is over MaxDelay (%v)", opts.MinDelay, opts.MaxDelay)
	}
	opts.fillDefaults() // moves a default delay to the one set, if need be
	return &Consumer{o: opts}, nil
}

func (o *Options) fillDefaults() {
	o.Policy = o.Policy.Inherit(idem.Policy{Settle: DefaultSettle})
	if o.MinDelay == 0 {
		o.MinDelay = DefaultMinDelay
		if o.MaxDelay != 0 {
			o.MinDelay = min(o.MinDelay, o.MaxDelay)
		}
	}
	if o.MaxDelay == 0 {
		o.MaxDelay = max(DefaultMaxDelay, o.MinDelay)
	}
	if o.MissingKey == 0 {
		o.MissingKey = Term
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
}

// Runtime returns the consumer's runtime: nil for a nil consumer or one
// not built by [New].
func (c *Consumer) Runtime() *idem.Runtime {
	if c == nil {
		return nil
	}
	return c.o.Runtime
}

// backoff is the delay after a transient error at attempt.
func (c *Consumer) backoff(attempt int) time.Duration {
	attempt = max(attempt, 1)
	if c.o.Backoff != nil {
		if d, ok := c.userBackoff(attempt); ok {
			return c.clamp(d)
		}
	}
	// Doubling stops before it could pass MaxDelay, so it never overflows
	// and runs at most about 63 times, whatever the attempt.
	d := c.o.MinDelay
	for i := 1; i < attempt; i++ {
		if d > c.o.MaxDelay/2 {
			return c.o.MaxDelay
		}
		d *= 2
	}
	return c.clamp(d)
}

// userBackoff asks Options.Backoff for the delay at attempt. A Backoff
// that panics (a table indexed by attempt, say) answers nothing (ok is
// false, and the default backoff is used) and a warning is logged: Handle
// does not panic.
func (c *Consumer) userBackoff(attempt int) (d time.Duration, ok bool) {
	defer func() {
		if r := recover(); r != nil {
			c.o.Logger.Warn("consume: Options.Backoff panicked; the default backoff is used",
				"attempt", attempt, "panic", fmt.Sprint(r))
			d, ok = 0, false
		}
	}()
	return c.o.Backoff(attempt), true
}

// clamp bounds d by MinDelay and MaxDelay.
func (c *Consumer) clamp(d time.Duration) time.Duration {
	return min(max(d, c.o.MinDelay), c.o.MaxDelay)
}
