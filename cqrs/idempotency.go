package cqrs

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store"
)

// IdempotencyOptions configures an [Idempotency] behaviour. The zero value
// is valid: every field has a documented default, used when it is left
// zero. Negative durations are errors.
type IdempotencyOptions struct {
	// Runtime runs commands once per key; give every instance of a service
	// a runtime on one shared store (store/redisstore) to share the
	// guarantee between them.
	// Default: a runtime of the behaviour's own on the in-memory store,
	// closed by Close.
	Runtime *idem.Runtime

	// Policy is the behaviour's idem policy, with defaults of its own (the
	// reference design's), not the runtime's:
	//
	//   - Lease is the command's lock TTL (LockTTL is its other spelling).
	//     The lock is never renewed (NoRenewal is always on): a holder
	//     that has not finished within it (crashed, or hung in a live
	//     process) is taken over by the next dispatch, and its own late
	//     result is refused with idem.ErrLeaseLost. Set it above the
	//     longest a handler may take. Default: 60s.
	//   - TTL is how long a command's result is kept and replayed: the
	//     processed TTL (ProcessedTTL is its other spelling). Default: 24h.
	//   - FailFast is the default: a duplicate of a command in flight
	//     fails at once with an error matching idem.ErrConflict. Set
	//     Settle to have it wait that long for the holder's result
	//     instead.
	//   - Classifier must be nil: the behaviour keeps only successes, and
	//     every failure releases the lock (use idem.Do for a failure that
	//     must be replayed).
	idem.Policy

	// LockTTL is the reference design's name of Policy.Lease, the lock's
	// hard TTL; set one of the two.
	// Default: 60s.
	LockTTL time.Duration

	// ProcessedTTL is the reference design's name of Policy.TTL, how long
	// a command's result is kept and replayed; set one of the two.
	// Default: 24h.
	ProcessedTTL time.Duration

	// Optional lets commands without a request id run (without
	// idempotency). Default: false: they fail with ErrNoRequestID and the
	// handler does not run.
	Optional bool

	// Fingerprint digests a command. A request id reused with a command
	// whose fingerprint differs fails with idem.ErrFingerprintMismatch
	// instead of replaying another command's result.
	// Default: a SHA-256 of the command's type name, so a request id reused
	// by another command type is refused. Return a digest of the command's
	// fields too to refuse a reuse with different arguments.
	Fingerprint func(msg *Message) ([]byte, error)
}

// Idempotency is the pipeline behaviour that runs each command once per
// (tenant, request id). Create it with [NewIdempotency], add it to a bus
// with [Bus.Use], and [Idempotency.Close] it when done. See the package
// documentation for what it guarantees.
type Idempotency struct {
	rt       *idem.Runtime
	own      bool
	optional bool
	fp       func(*Message) ([]byte, error)
	opts     []idem.CallOption // the options shared by every call
	close    sync.Once
	closeErr error
}

var _ Behaviour = (*Idempotency)(nil)

// The behaviour's own defaults (see IdempotencyOptions.Policy).
var defaultPolicy = idem.Policy{
	FailFast:  true,
	Lease:     60 * time.Second,
	TTL:       24 * time.Hour,
	NoRenewal: true,
}

// NewIdempotency returns the idempotency behaviour. It fails with an error
// matching idem.ErrInvalidArgument on a negative or too long duration, on
// FailFast with Settle, on LockTTL with Lease or ProcessedTTL with TTL, and
// on a Classifier.
func NewIdempotency(opts IdempotencyOptions) (*Idempotency, error) {
	pol, err := opts.policy()
	if err != nil {
		return nil, err
	}
	p := &Idempotency{
		rt:       opts.Runtime,
		optional: opts.Optional,
		fp:       opts.Fingerprint,
		opts: []idem.CallOption{
			// A lock with a TTL (NoRenewal): a holder that never finishes,
			// even in a live process, is taken over after the lease; a
			// duplicate fails fast while another holder has the lock,
			// unless Settle says to wait.
			idem.WithPolicy(pol),
			// Nothing but a success is stored: a runtime-wide classifier
			// must not make a handler's error permanent.
			idem.WithClassifier(func(error) bool { return false }),
		},
	}
	if p.rt == nil {
		rt, err := idem.New(idem.Options{})
		if err != nil {
			return nil, fmt.Errorf("cqrs: start the idem runtime: %w", err)
		}
		p.rt, p.own = rt, true
	}
	return p, nil
}

// policy is the behaviour's resolved policy: the options' fields, under
// their policy names or the reference design's, over the defaults.
func (o IdempotencyOptions) policy() (idem.Policy, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: cqrs: IdempotencyOptions.%s", idem.ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	pol := o.Policy
	for _, d := range []struct {
		name, other string
		v           time.Duration
		to          *time.Duration
	}{{"LockTTL", "Lease", o.LockTTL, &pol.Lease}, {"ProcessedTTL", "TTL", o.ProcessedTTL, &pol.TTL}} {
		if d.v == 0 {
			continue
		}
		if *d.to != 0 {
			return pol, bad("%s and %s are both set; they are one value (%[1]s is the reference design's name for it): set one", d.name, d.other)
		}
		if err := store.CheckDuration("cqrs: IdempotencyOptions."+d.name, d.v); err != nil {
			return pol, err
		}
		*d.to = d.v
	}
	if o.Classifier != nil {
		return pol, bad("Classifier is set; the behaviour keeps only successes, and a failure releases the lock (use idem.Do for a failure that must be replayed)")
	}
	if err := o.Policy.Validate("cqrs: IdempotencyOptions"); err != nil {
		return pol, err
	}
	return pol.Inherit(defaultPolicy), nil
}

// Close closes the runtime the behaviour owns (none when
// IdempotencyOptions.Runtime was given): it waits for the commands running
// to store their results, within ctx. Commands dispatched later fail with
// idem.ErrClosed. Close is idempotent.
func (p *Idempotency) Close(ctx context.Context) error {
	p.close.Do(func() {
		if p.own {
			p.closeErr = p.rt.Close(ctx)
		}
	})
	return p.closeErr
}

// Handle makes a command idempotent; queries pass through. It is the
// [Behaviour] the bus calls.
func (p *Idempotency) Handle(ctx context.Context, msg *Message, next Next) (any, error) {
	if msg == nil || msg.Kind != Command {
		return next(ctx)
	}
	id, ok := RequestID(ctx)
	if !ok {
		if p.optional {
			return next(ctx)
		}
		return nil, fmt.Errorf("%w (command %s)", ErrNoRequestID, msg.Name)
	}
	tenant, _ := Tenant(ctx)
	key, err := Key(tenant, id)
	if err != nil {
		return nil, fmt.Errorf("cqrs: command %s: %w", msg.Name, err)
	}
	if active, _ := ctx.Value(activeKey).(string); active == key {
		// A command dispatched by the handler of this key's command, with
		// its context: it is part of that command, which is idempotent.
		return next(ctx)
	}
	if msg.once == nil {
		return nil, fmt.Errorf("%w: cqrs: Idempotency.Handle needs a message from Dispatch", idem.ErrInvalidArgument)
	}
	fp, err := p.fingerprint(msg)
	if err != nil {
		return nil, fmt.Errorf("cqrs: command %s: fingerprint: %w", msg.Name, err)
	}
	opts := append(p.opts[:len(p.opts):len(p.opts)], idem.WithFingerprint(fp))
	res, err := msg.once(context.WithValue(ctx, activeKey, key), p.rt, key, next, opts)
	if err != nil {
		var he *handlerError
		if errors.As(err, &he) {
			return nil, he.err // the handler's (or a later behaviour's) own error
		}
		return nil, fmt.Errorf("cqrs: command %s: %w", msg.Name, err)
	}
	return res, nil
}

func (p *Idempotency) fingerprint(msg *Message) ([]byte, error) {
	if p.fp != nil {
		return p.fp(msg)
	}
	sum := sha256.Sum256([]byte("cqrs command\x00" + msg.Name))
	return sum[:], nil
}

// onceFunc runs next under idem.Do on key, typed with the handler's result.
type onceFunc func(ctx context.Context, rt *idem.Runtime, key string, next Next, opts []idem.CallOption) (any, error)

// once is the onceFunc of result type R. The result is stored with idem's
// codec (JSON): R must encode and decode. In this process, callers may share
// one result value: treat results as read-only.
func once[R any](ctx context.Context, rt *idem.Runtime, key string, next Next, opts []idem.CallOption) (any, error) {
	v, err := idem.Do(ctx, rt, key, func(ctx context.Context) (R, error) {
		res, err := next(ctx)
		if err != nil {
			var zero R
			return zero, &handlerError{err: err}
		}
		r, err := asResult[R](key, res)
		if err != nil {
			return r, &handlerError{err: err}
		}
		return r, nil
	}, opts...)
	if err != nil {
		return nil, err
	}
	return v, nil
}
