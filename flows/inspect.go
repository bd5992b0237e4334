package flows

// Reading what a flow's runs and steps left, by the keys Run uses, without
// running anything.

import (
	"context"
	"fmt"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/keytext"
	"github.com/idemrt/idem/store"
)

// Result returns the stored outcome of the run with workflow key key, as
// Run would give it to a duplicate, without running any step: the run's
// final state, or its permanent failure as a *StepError (with the step's
// original error in the process that ran it, while the runtime caches it;
// elsewhere an *idem.ReplayedError, which matches the error's registered
// sentinel or type: see idem.RegisterError).
//
// It fails with an error matching idem.ErrNotFound when the key has no
// run's record (never run, forgotten, expired, or run without a workflow
// key) and idem.ErrInProgress while a run holds it (see [idem.Get] for
// stores that cannot tell the two apart). Of opts, only Namespace and
// Version are used: the key's scope, as Run builds it.
func (f *Flow[S]) Result(ctx context.Context, rt *idem.Runtime, key string, opts RunOptions[S]) (S, error) {
	var zero S
	scoped, err := f.runKeyOf(key, &opts)
	if err != nil {
		return zero, err
	}
	res, err := idem.Get[runResult[S]](ctx, rt, scoped, idem.WithFingerprint(f.fingerprint("")))
	if err != nil {
		return zero, err
	}
	if err := f.failure(scoped, res); err != nil {
		return zero, err
	}
	// The record may be the runtime's cached value, shared with every
	// caller: the caller gets its own copy.
	return clone(res.State)
}

// State returns the state of the run with workflow key key (see
// [idem.Runtime.State]): absent, in progress, completed or failed. A run
// whose step failed permanently is KeyCompleted here: its record holds the
// failure as the run's outcome (read it with Result). Of opts, only
// Namespace and Version are used.
func (f *Flow[S]) State(ctx context.Context, rt *idem.Runtime, key string, opts RunOptions[S]) (idem.KeyState, error) {
	scoped, err := f.runKeyOf(key, &opts)
	if err != nil {
		return idem.KeyState{}, err
	}
	return rt.State(ctx, scoped)
}

// StepResult returns the stored output state of the idempotent step named
// step with step key key (what the step's key function returned, within
// the scope of opts.Namespace and Version), without running it: what a run
// would replay. A step that failed permanently gives its error as a
// *StepError. Errors are as for Result; a key stored by another step or
// flow is idem.ErrFingerprintMismatch. For a reduce step, key is one
// item's key.
func (f *Flow[S]) StepResult(ctx context.Context, rt *idem.Runtime, step, key string, opts RunOptions[S]) (S, error) {
	var zero S
	if !f.hasStep(step) {
		return zero, errorf("flow %q has no step %q", f.name, step)
	}
	scoped, err := f.stepKeyOf(key, &opts)
	if err != nil {
		return zero, err
	}
	out, err := idem.Get[S](ctx, rt, scoped, idem.WithFingerprint(f.fingerprint(step)))
	switch {
	case err != nil && idem.IsPermanent(err):
		return zero, &StepError{Flow: f.name, Step: step, Item: -1, Err: err}
	case err != nil:
		return zero, fmt.Errorf("flows: %s: step %q: %w", f.name, step, err)
	}
	return clone(out)
}

// StepState returns the state of the step key key (see
// [idem.Runtime.State]), within the scope of opts.Namespace and Version.
func (f *Flow[S]) StepState(ctx context.Context, rt *idem.Runtime, key string, opts RunOptions[S]) (idem.KeyState, error) {
	scoped, err := f.stepKeyOf(key, &opts)
	if err != nil {
		return idem.KeyState{}, err
	}
	return rt.State(ctx, scoped)
}

// runKeyOf checks a workflow key and returns its scoped key.
func (f *Flow[S]) runKeyOf(key string, opts *RunOptions[S]) (string, error) {
	if key == "" {
		return "", errorf("flow %q: empty workflow key", f.name)
	}
	scoped := f.runKey(key, store.Scope{Namespace: opts.Namespace, Version: opts.Version})
	if err := store.ValidateKey(scoped); err != nil {
		return "", fmt.Errorf("flows: %s: workflow key %s: %w", f.name, keytext.Quote(key), err)
	}
	return scoped, nil
}

// stepKeyOf checks a step key and returns its scoped key.
func (f *Flow[S]) stepKeyOf(key string, opts *RunOptions[S]) (string, error) {
	if key == "" {
		return "", errorf("flow %q: empty step key", f.name)
	}
	scoped := stepKey(key, store.Scope{Namespace: opts.Namespace, Version: opts.Version})
	if err := store.ValidateKey(scoped); err != nil {
		return "", fmt.Errorf("flows: %s: step key %s: %w", f.name, keytext.Quote(key), err)
	}
	return scoped, nil
}

func (f *Flow[S]) hasStep(name string) bool {
	for _, st := range f.steps {
		if st.stepName() == name {
			return true
		}
	}
	return false
}

// fingerprint is the fingerprint of the flow's step ("" for the run
// itself).
func (f *Flow[S]) fingerprint(step string) []byte { return fingerprint(f.name, step) }
