package flows

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/keytext"
	"github.com/idemrt/idem/store"
)

// ErrInvalidFlow is the error of a flow that cannot run: an empty or
// duplicate step name, a nil step or function, bad options, a key function
// that returns an empty or invalid key. errors.Is(err, idem.ErrInvalidArgument)
// is true as well.
var ErrInvalidFlow = fmt.Errorf("%w: invalid flow", idem.ErrInvalidArgument)

func errorf(format string, args ...any) error {
	return fmt.Errorf("flows: %w: %s", ErrInvalidFlow, fmt.Sprintf(format, args...))
}

// Flow is a named list of steps over a state S. Create it with [New]; it is
// immutable and safe to Run from many goroutines.
type Flow[S any] struct {
	name  string
	steps []Stepper[S]
}

// New returns a flow named name (the name is part of every step's
// fingerprint) with the given steps, in order. It checks them before
// anything runs: no nil step, no empty or duplicate step name, no nil
// function or hook, no negative option.
func New[S any](name string, steps ...Stepper[S]) (*Flow[S], error) {
	if name == "" {
		return nil, errorf("empty flow name")
	}
	if len(steps) == 0 {
		return nil, errorf("flow %q has no steps", name)
	}
	seen := map[string]bool{}
	own := make([]Stepper[S], len(steps))
	for i, st := range steps {
		if st == nil || st.isNil() {
			return nil, errorf("flow %q: step %d is nil", name, i)
		}
		n := st.stepName()
		switch {
		case n == "":
			return nil, errorf("flow %q: step %d has an empty name", name, i)
		case seen[n]:
			return nil, errorf("flow %q: two steps are named %q", name, n)
		}
		seen[n] = true
		// The flow keeps its own copy: changing a step after New (adding a
		// hook, say) changes nothing in the flow, which stays as checked.
		own[i] = st.snapshot()
		if err := own[i].check(); err != nil {
			return nil, fmt.Errorf("flow %q: %w", name, err)
		}
	}
	return &Flow[S]{name: name, steps: own}, nil
}

// Must returns f, or panics if err is not nil: for flows declared at
// package level.
func Must[S any](f *Flow[S], err error) *Flow[S] {
	if err != nil {
		panic(err)
	}
	return f
}

// Name returns the flow's name.
func (f *Flow[S]) Name() string { return f.name }

// RunOptions configure one run of a flow. The zero value runs the steps
// without workflow-level idempotency, each idempotent step keyed in the
// empty namespace.
type RunOptions[S any] struct {
	// IdempotencyKey makes the whole run idempotent: a second run with the
	// same key (in the same namespace and version) returns the first run's
	// output without running any step.
	IdempotencyKey string
	// KeyFunc computes the workflow key from the input instead. Set one of
	// IdempotencyKey and KeyFunc, or neither.
	KeyFunc func(S) string
	// Namespace and Version scope every key of the run (the workflow's and
	// the steps'), e.g. a tenant and the flow's version.
	Namespace, Version string
	// Policy is the run's: the settle time (or FailFast) of a duplicate
	// run, the lease and TTL of the run's workflow key, and the classifier
	// of its steps' errors, besides those marked with idem.Permanent. It
	// is also the policy of every idempotent step, for the fields the
	// step's own StepOptions leave zero: a run's FailFast makes its steps
	// fail fast too, a run's TTL keeps its steps' results as long. Fields
	// left zero are the runtime's (idem.Options.Policy).
	idem.Policy
}

// StepError is the error of a step that failed: its name (and item, for a
// reduce step) and the cause. errors.Is and errors.As see the cause.
type StepError struct {
	Flow string
	Step string
	Item int // index of the item in a reduce step; -1 for a plain step
	Err  error
}

func (e *StepError) Error() string {
	if e.Item >= 0 {
		return fmt.Sprintf("flows: %s: step %q, item %d: %v", e.Flow, e.Step, e.Item, e.Err)
	}
	return fmt.Sprintf("flows: %s: step %q: %v", e.Flow, e.Step, e.Err)
}

// Unwrap returns the cause.
func (e *StepError) Unwrap() error { return e.Err }

// itemError marks err with the reduce item it came from (once: an inner
// error keeps its item).
func itemError(step string, i int, err error) error {
	var se *StepError
	if errors.As(err, &se) {
		return err
	}
	return &StepError{Step: step, Item: i, Err: err}
}

func checkStepOptions(step string, o StepOptions) error {
	return checkPolicy(o.Policy, fmt.Sprintf("step %q: StepOptions", step))
}

// checkPolicy checks the policy of the options named name (see
// idem.Policy.Validate), as an ErrInvalidFlow.
func checkPolicy(p idem.Policy, name string) error {
	err := p.Validate(name)
	if err == nil {
		return nil
	}
	// The cause says ErrInvalidArgument, as ErrInvalidFlow does: once.
	return errorf("%s", strings.TrimPrefix(err.Error(), idem.ErrInvalidArgument.Error()+": "))
}

// Run runs the flow on input and returns the final state.
//
// With a workflow key the whole run is one idem key: a run already
// completed returns its output (or its permanent error) without running any
// step; a duplicate while it runs waits (RunOptions.Settle) or fails
// with idem.ErrConflict. Each idempotent step is its own idem key within
// the run's scope. A step's error is returned as a *StepError; if it is
// permanent the run's record keeps it, and every later run with the key
// gets it back (from another process, as a *StepError whose cause is an
// *idem.ReplayedError with the original message). On error, Run returns
// input unchanged.
func (f *Flow[S]) Run(ctx context.Context, rt *idem.Runtime, input S, opts RunOptions[S]) (S, error) {
	if err := f.checkRun(rt, &opts); err != nil {
		return input, err
	}
	x := &exec[S]{rt: rt, flow: f.name, scope: store.Scope{Namespace: opts.Namespace, Version: opts.Version}, opts: &opts}
	key, err := f.workflowKey(input, &opts)
	if err != nil {
		return input, err
	}
	// The steps get a private copy of the input: a step that changes the
	// state in place must not reach the caller's value, nor a cached one.
	start, err := clone(input)
	if err != nil {
		return input, fmt.Errorf("flows: %s: the state does not round-trip through JSON: %w", f.name, err)
	}
	if key == "" {
		out, err := f.runSteps(ctx, x, start)
		if err != nil {
			return input, err
		}
		return out, nil
	}
	res, err := f.runKeyed(ctx, x, key, start)
	if err != nil {
		return input, err
	}
	return clone(res.State)
}

// checkRun checks the runtime and the options of a run.
func (f *Flow[S]) checkRun(rt *idem.Runtime, opts *RunOptions[S]) error {
	if rt == nil {
		return errorf("flow %q: Run with a nil runtime", f.name)
	}
	if opts.IdempotencyKey != "" && opts.KeyFunc != nil {
		return errorf("flow %q: set IdempotencyKey or KeyFunc, not both", f.name)
	}
	return checkPolicy(opts.Policy, fmt.Sprintf("flow %q: RunOptions", f.name))
}

// workflowKey is the run's workflow key, from IdempotencyKey or KeyFunc:
// "" for a run without one.
func (f *Flow[S]) workflowKey(input S, opts *RunOptions[S]) (string, error) {
	if opts.KeyFunc == nil {
		return opts.IdempotencyKey, nil
	}
	key := opts.KeyFunc(input)
	if key == "" {
		return "", errorf("flow %q: KeyFunc returned an empty key", f.name)
	}
	return key, nil
}

// runKeyed runs the steps once per workflow key: it returns the run's
// record, the one it made or the one an earlier run left, with the error of
// a permanent failure the record holds.
func (f *Flow[S]) runKeyed(ctx context.Context, x *exec[S], key string, start S) (runResult[S], error) {
	scoped := f.runKey(key, x.scope)
	if err := store.ValidateKey(scoped); err != nil {
		return runResult[S]{}, fmt.Errorf("flows: %s: workflow key %s: %w", f.name, keytext.Quote(key), err)
	}
	res, err := idem.Do(ctx, x.rt, scoped, func(ctx context.Context) (runResult[S], error) {
		return f.runRecorded(ctx, x, start)
	}, x.workflowOptions()...)
	if err != nil {
		return res, err
	}
	return res, f.failure(scoped, res)
}

// runKey is the scoped key of the run with workflow key key.
func (f *Flow[S]) runKey(key string, scope store.Scope) string {
	return store.BuildKey("flow:"+store.EscapeSegment(f.name)+":"+key, scope)
}

// failure is the error of a run's record: nil for a run that completed, or
// the permanent error of the step that failed.
func (f *Flow[S]) failure(scoped string, res runResult[S]) error {
	switch {
	case res.Failed == nil:
		return nil
	case res.err != nil:
		return res.err // this process still has the error itself
	}
	fl := res.Failed
	return &StepError{Flow: f.name, Step: fl.Step, Item: fl.Item,
		Err: &idem.ReplayedError{Key: scoped, Message: fl.Message, Code: fl.Code, Detail: fl.Detail}}
}

// runRecorded is the function of a run with a workflow key: it runs the
// steps and returns what the key's record keeps.
func (f *Flow[S]) runRecorded(ctx context.Context, x *exec[S], start S) (runResult[S], error) {
	out, err := f.runSteps(ctx, x, start)
	if err == nil {
		return runResult[S]{State: out}, nil
	}
	if !x.permanent(err) {
		return runResult[S]{}, err // transient: the run's key is released
	}
	// A permanent failure is the run's outcome: kept as the run's record,
	// with the step it came from, so that every later run gets it back as a
	// *StepError; with its code, when its kind is registered (see
	// idem.RegisterError), so that it matches errors.Is and errors.As there.
	cause := err
	fl := &storedFailure{Item: -1}
	var se *StepError
	if errors.As(err, &se) {
		fl.Step, fl.Item, cause = se.Step, se.Item, se.Err
	}
	re := idem.NewReplayedError("", cause)
	fl.Message, fl.Code, fl.Detail = re.Message, re.Code, re.Detail
	return runResult[S]{Failed: fl, err: err}, nil
}

// runResult is what a run with a workflow key stores: its final state, or
// the permanent failure of one of its steps.
type runResult[S any] struct {
	State  S              `json:"state"`
	Failed *storedFailure `json:"failed,omitempty"`
	err    error          // the failure's own error value, in the process that ran it
}

// storedFailure is a step's permanent error as stored: the fields of the
// idem.ReplayedError it is given back as.
type storedFailure struct {
	Step    string `json:"step"`
	Item    int    `json:"item"`
	Message string `json:"message"`
	Code    string `json:"code,omitempty"`
	Detail  string `json:"detail,omitempty"`
}

// runSteps runs every step in order.
func (f *Flow[S]) runSteps(ctx context.Context, x *exec[S], s S) (S, error) {
	for _, st := range f.steps {
		if err := ctx.Err(); err != nil {
			return s, err
		}
		out, err := st.run(ctx, x, s)
		if err != nil {
			var se *StepError
			if errors.As(err, &se) {
				if se.Flow == "" {
					se.Flow = f.name
				}
				return s, se
			}
			return s, &StepError{Flow: f.name, Step: st.stepName(), Item: -1, Err: err}
		}
		s = out
	}
	return s, nil
}
