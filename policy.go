package idem

import (
	"fmt"
	"time"

	"github.com/idemrt/idem/store"
)

// Policy is how the calls of a key behave in time and on failure: how long
// a duplicate waits for a run in flight (Settle) or that it does not wait
// (FailFast), how long a claim holds its key (Lease) and whether it is
// renewed (NoRenewal), how long a result is kept (TTL), and which errors
// are kept like results (Classifier).
//
// One Policy is embedded in the runtime's [Options] and in the options of
// every front end (flows.RunOptions and flows.StepOptions,
// cqrs.IdempotencyOptions, httpidem.Options, consume.Options); call
// options set its fields for one call ([WithPolicy], [WithSettle],
// [WithFailFast], [WithLease], [WithoutRenewal], [WithTTL],
// [WithClassifier]). A field left zero inherits, layer by layer: the
// call's, else the front end's, else the runtime's, else the built-in
// default given with each field below. A front end may have a default of
// its own for a field, which then comes before the runtime's (HTTP waits
// 10s, not 30s); docs/semantics.md has them all in one table.
//
// Since an embedded field cannot be named in a composite literal by its
// own name, set it through the Policy:
//
//	idem.Options{Policy: idem.Policy{Lease: 10 * time.Second}}
//
// and read it either way (o.Lease, o.Policy.Lease).
type Policy struct {
	// Settle is how long a call waits for a run of its key in flight, in
	// this process or in another instance, for that run's result. Past it
	// (or when the caller's context ends first) the call fails with a
	// *ConflictError, and the run goes on. Settle and FailFast are one
	// choice, made by the nearest layer that sets either: a call that sets
	// Settle waits even where the runtime or its front end fails fast.
	// Default: 30s. At most store.MaxDuration.
	Settle time.Duration

	// FailFast makes a call fail at once with a *ConflictError while
	// another run holds its key, instead of waiting (what an HTTP API
	// answers with 409). It is its own field: a zero Settle always means
	// "inherit", never "do not wait". Setting Settle in the same Policy is
	// an error.
	// Default: false: duplicates wait (Settle).
	FailFast bool

	// Lease is how long a claim holds its key without renewal. The
	// function's lease is renewed every third of it while it runs (unless
	// NoRenewal), so it matters when a process dies: its keys are taken
	// over after this long. A lease never lasts forever.
	// Default: 60s. At most store.MaxDuration.
	Lease time.Duration

	// NoRenewal makes the lease a hard limit, as a lock with a TTL: it is
	// not renewed while the function runs, so a run that outlasts it (a
	// hung function in a live process, too) can be taken over by another
	// caller, and its own result is then refused with ErrLeaseLost. Like
	// every field, false inherits: once a layer sets it, no nearer layer
	// (a front end, a call) turns renewal back on.
	// Default: false: the lease is renewed every third of it.
	NoRenewal bool

	// TTL is how long a completed result (or permanent error) is kept and
	// replayed.
	// Default: 24h. At most store.MaxDuration.
	TTL time.Duration

	// Classifier decides which errors of functions are permanent: those
	// for which it returns true are stored and replayed like results, as
	// if marked with [Permanent]. Errors marked with Permanent always are.
	// Default: nil: only errors marked with Permanent are permanent.
	Classifier func(error) bool
}

// builtin is the policy of the last layer: the defaults of Policy's fields.
var builtin = Policy{
	Settle: 30 * time.Second,
	Lease:  60 * time.Second,
	TTL:    24 * time.Hour,
}

// Inherit returns p with each field it leaves zero taken from from: p is
// the nearer layer (a call, a front end), from the one below it (a front
// end, the runtime). Settle and FailFast go together: when p sets neither,
// it takes both of from's; when it sets either, it keeps both of its own.
// NoRenewal is true when either has it.
func (p Policy) Inherit(from Policy) Policy {
	if p.Settle == 0 && !p.FailFast {
		p.Settle, p.FailFast = from.Settle, from.FailFast
	}
	if p.Lease == 0 {
		p.Lease = from.Lease
	}
	if p.TTL == 0 {
		p.TTL = from.TTL
	}
	p.NoRenewal = p.NoRenewal || from.NoRenewal
	if p.Classifier == nil {
		p.Classifier = from.Classifier
	}
	return p
}

// Validate returns an error matching [ErrInvalidArgument] when a field of
// p is out of range: a negative duration (zero means inherit), one over
// store.MaxDuration (100 years), or FailFast set together with Settle.
// name is what the caller calls p, as in "Options" or "flows.RunOptions":
// the error names the field as name.Field (Options.Settle).
func (p Policy) Validate(name string) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidArgument, fmt.Sprintf(format, args...))
	}
	for _, d := range []struct {
		field string
		v     time.Duration
	}{{"Settle", p.Settle}, {"Lease", p.Lease}, {"TTL", p.TTL}} {
		if d.v < 0 {
			return bad("%s.%s is %v; it must not be negative (zero means the default)", name, d.field, d.v)
		}
		if d.v > store.MaxDuration {
			return bad("%s.%s is %v; it must be at most %v", name, d.field, d.v, store.MaxDuration)
		}
	}
	if p.FailFast && p.Settle > 0 {
		return bad("%s.FailFast is set, and so is Settle (%v); set one of them", name, p.Settle)
	}
	return nil
}
