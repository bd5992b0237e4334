package flows

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/keytext"
	"github.com/idemrt/idem/store"
)

// One run's executor: the idem call that makes a step or a reduce item
// happen once per key, and the idem options of that call and of the run's
// own call with a workflow key (see Flow.Run).

// exec is one run: the runtime, the scope and the options the steps use.
type exec[S any] struct {
	rt    *idem.Runtime
	flow  string
	scope store.Scope
	opts  *RunOptions[S]
}

// fingerprint ties a step's records to this flow and step: the same key
// used by another flow or step is a mismatch, never a merge.
func (x *exec[S]) fingerprint(step string) []byte { return fingerprint(x.flow, step) }

// fingerprint is the fingerprint of a flow's step ("" for the run itself).
func fingerprint(flow, step string) []byte {
	sum := sha256.Sum256([]byte("flow\x00" + flow + "\x00step\x00" + step))
	return sum[:]
}

// once runs body as the step (or reduce item) with key, once per key.
func (x *exec[S]) once(ctx context.Context, step, key string, so StepOptions, s S, body func(context.Context, S) (S, error)) (S, error) {
	if key == "" {
		return s, errorf("step %q: its key function returned an empty key", step)
	}
	scoped := stepKey(key, x.scope)
	if err := store.ValidateKey(scoped); err != nil {
		return s, fmt.Errorf("flows: step %q: key %s: %w", step, keytext.Quote(key), err)
	}
	out, err := idem.Do(ctx, x.rt, scoped, func(ctx context.Context) (S, error) { return body(ctx, s) }, x.stepOptions(step, so)...)
	if err != nil {
		return s, err
	}
	// A result from the runtime's cache is shared with every caller that
	// replays it; the next steps get their own copy to change.
	return clone(out)
}

// stepOptions are the idem options of an idempotent step's call: the
// step's policy over the run's (the runtime's, for the fields neither
// sets).
func (x *exec[S]) stepOptions(step string, so StepOptions) []idem.CallOption {
	return []idem.CallOption{
		idem.WithFingerprint(x.fingerprint(step)),
		idem.WithPolicy(so.Policy.Inherit(x.opts.Policy)),
	}
}

// workflowOptions are the idem options of the call that makes a run with a
// workflow key idempotent: the run's policy (the runtime's, for the fields
// it leaves zero).
func (x *exec[S]) workflowOptions() []idem.CallOption {
	return []idem.CallOption{idem.WithPolicy(x.opts.Policy), idem.WithFingerprint(x.fingerprint(""))}
}

// stepKey is the scoped key of a step (or reduce item) with key key.
func stepKey(key string, scope store.Scope) string { return store.BuildKey("step:"+key, scope) }

// clone deep-copies a state through JSON, the codec it is stored with.
func clone[S any](s S) (S, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return s, err
	}
	var out S
	if err := json.Unmarshal(b, &out); err != nil {
		return s, err
	}
	return out, nil
}

// permanent reports whether a step's error is permanent for this run.
func (x *exec[S]) permanent(err error) bool {
	return idem.IsPermanent(err) || (x.opts.Classifier != nil && x.opts.Classifier(err))
}
