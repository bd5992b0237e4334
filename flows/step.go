package flows

import (
	"context"

	"github.com/idemrt/idem"
)

// Stepper is one step of a flow: a plain step ([Step]) or a reduce step
// ([Reduce]).
type Stepper[S any] interface {
	stepName() string
	run(ctx context.Context, x *exec[S], s S) (S, error)
	check() error
	isNil() bool
	snapshot() Stepper[S]
}

// StepOptions adjust an idempotent step.
type StepOptions struct {
	// Policy is the step's: how long its result is kept (TTL), its lease,
	// and how long it waits for another run of the same step key in
	// flight (Settle), or that it does not (FailFast). That other run is a
	// concurrent run of a flow without a workflow key, or a run left by a
	// process that died, which is taken over when its lease ends (set
	// Settle above the lease to wait for that takeover); past Settle, the
	// step fails with idem.ErrConflict. Fields left zero are the run's
	// (RunOptions), then the runtime's (idem.Options.Policy: Settle 30s,
	// Lease 60s, TTL 24h).
	idem.Policy
}

// StepDef is a step built by [Step]. Its methods configure it and return it,
// so a step reads as one expression.
type StepDef[S any] struct {
	name   string
	fn     func(context.Context, S) (S, error)
	key    func(S) string
	keyNil bool // Idempotent was given a nil key function
	opts   StepOptions
	before []func(context.Context, S) error
	after  []func(context.Context, S) error
}

// Step returns a step named name that turns the state into a new state.
// Without Idempotent it runs every time the flow runs.
func Step[S any](name string, fn func(context.Context, S) (S, error)) *StepDef[S] {
	return &StepDef[S]{name: name, fn: fn}
}

// Idempotent makes the step run once per key: key computes the step's
// idempotency key from the state before the step (for example
// "charge:"+s.InvoiceID). Its output state is stored and replayed.
func (d *StepDef[S]) Idempotent(key func(S) string, opts StepOptions) *StepDef[S] {
	d.key, d.opts, d.keyNil = key, opts, key == nil
	return d
}

// OnBefore adds a hook that runs before the step's function each time the
// step executes (not when its result is replayed). An error stops the step.
func (d *StepDef[S]) OnBefore(h func(context.Context, S) error) *StepDef[S] {
	d.before = append(d.before, h)
	return d
}

// OnAfter adds a hook that runs after the step's function, with the new
// state, each time the step executes. The step's result is stored only once
// every OnAfter hook has passed; an error releases the step (or, if
// permanent, stores the error).
func (d *StepDef[S]) OnAfter(h func(context.Context, S) error) *StepDef[S] {
	d.after = append(d.after, h)
	return d
}

func (d *StepDef[S]) stepName() string { return d.name }

func (d *StepDef[S]) isNil() bool { return d == nil }

func (d *StepDef[S]) snapshot() Stepper[S] {
	c := *d
	c.before = append([]func(context.Context, S) error(nil), d.before...)
	c.after = append([]func(context.Context, S) error(nil), d.after...)
	return &c
}

func (d *StepDef[S]) check() error {
	if d.fn == nil {
		return errorf("step %q has a nil function", d.name)
	}
	for _, h := range append(append([]func(context.Context, S) error{}, d.before...), d.after...) {
		if h == nil {
			return errorf("step %q has a nil hook", d.name)
		}
	}
	if d.keyNil {
		return errorf("step %q: Idempotent with a nil key function", d.name)
	}
	return checkStepOptions(d.name, d.opts)
}

// body runs the hooks and the function: what executes when the step runs.
func (d *StepDef[S]) body(ctx context.Context, s S) (S, error) {
	for _, h := range d.before {
		if err := h(ctx, s); err != nil {
			return s, err
		}
	}
	out, err := d.fn(ctx, s)
	if err != nil {
		return out, err
	}
	for _, h := range d.after {
		if err := h(ctx, out); err != nil {
			return out, err
		}
	}
	return out, nil
}

func (d *StepDef[S]) run(ctx context.Context, x *exec[S], s S) (S, error) {
	if d.key == nil {
		return d.body(ctx, s)
	}
	return x.once(ctx, d.name, d.key(s), d.opts, s, d.body)
}
