package idem

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemrt/idem/actors"
	"github.com/idemrt/idem/store"
)

// Observer receives what the runtime decides, for metrics and logs (see
// package idemprom for a Prometheus collector). Set it in Options.Observer.
//
// Its methods are called outside any lock and never on a shard actor's
// goroutine: OnCall on the caller's goroutine as Do returns, OnStoreBatch on
// a shard's store worker after each batch (never for an in-process store).
// They must be quick and must not block. Without an Observer (and without a
// TracerProvider) the runtime measures nothing and costs nothing extra.
type Observer interface {
	OnCall(CallEvent)
	OnStoreBatch(StoreBatchEvent)
}

// CallEvent describes one call of Do.
type CallEvent struct {
	// Namespace is the namespace of a key built with store.BuildKey ("" for
	// other keys). The key itself is not reported unless
	// Options.ObserveKeys is set: keys can hold personal data.
	Namespace string
	// Key is the call's key, only with Options.ObserveKeys.
	Key string
	// Outcome says how the call got its answer (NoOutcome on failure).
	Outcome Outcome
	// Result classifies the answer.
	Result Result
	// Duration is the whole call.
	Duration time.Duration
	// Wait is how long the call waited for another caller's run: until it
	// was given the result (Joined), the key (an Executed call that was
	// handed the key), or a conflict. Zero for a call that did not wait.
	Wait time.Duration
	// Run is, for an Executed call, the time from being given the key to
	// having the result stored: the function and the store write.
	Run time.Duration
	// Fence is the fencing token of an Executed call's claim.
	Fence uint64
}

// StoreBatchEvent describes one batch of store operations (one round trip).
type StoreBatchEvent struct {
	Shard    int
	Ops      int
	Failed   int // operations the store failed (not refusals such as a lost lease)
	Duration time.Duration
}

// Result classifies the answer of a call.
type Result uint8

// Results.
const (
	ResultOK         Result = iota // a value
	ResultError                    // the function's error (or a stored permanent error)
	ResultPanic                    // the function panicked
	ResultConflict                 // ErrConflict
	ResultMismatch                 // ErrFingerprintMismatch
	ResultLeaseLost                // ErrLeaseLost
	ResultStoreError               // ErrStoreUnavailable
	ResultOverloaded               // ErrOverloaded
	ResultClosed                   // ErrClosed
	ResultInvalid                  // ErrInvalidKey, ErrInvalidArgument
	ResultCanceled                 // the caller's context ended
	ResultCodecError               // a *CodecError
)

var resultNames = [...]string{"ok", "error", "panic", "conflict", "fingerprint_mismatch", "lease_lost",
	"store_error", "overloaded", "closed", "invalid", "canceled", "codec_error"}

func (r Result) String() string {
	if int(r) < len(resultNames) {
		return resultNames[r]
	}
	return "unknown"
}

// classify turns a call's error into its Result. A context error counts as
// canceled only when it is the caller's own context that ended (ctxErr);
// a function that failed on its own timeout returned an error.
func classify(err, ctxErr error) Result {
	var pe *PanicError
	var ce *CodecError
	switch {
	case err == nil:
		return ResultOK
	case errors.As(err, &pe):
		return ResultPanic
	case errors.As(err, &ce):
		return ResultCodecError
	case errors.Is(err, ErrConflict):
		return ResultConflict
	case errors.Is(err, ErrFingerprintMismatch):
		return ResultMismatch
	case errors.Is(err, ErrLeaseLost):
		return ResultLeaseLost
	case errors.Is(err, ErrStoreUnavailable):
		return ResultStoreError
	case errors.Is(err, ErrOverloaded):
		return ResultOverloaded
	case errors.Is(err, ErrClosed):
		return ResultClosed
	case errors.Is(err, ErrInvalidKey), errors.Is(err, ErrInvalidArgument):
		return ResultInvalid
	case ctxErr != nil && errors.Is(err, ctxErr):
		return ResultCanceled
	}
	return ResultError
}

// namespaceOf returns the namespace of a key built with store.BuildKey, or
// "" for other keys.
func namespaceOf(key string) string {
	if _, scope, ok := store.ParseKey(key); ok {
		return scope.Namespace
	}
	return ""
}

// callStats is what do measures for an observed call.
type callStats struct {
	sent   time.Time // the request went to the shard
	wait   time.Duration
	run    time.Duration
	fence  uint64
	waited bool
}

// observed runs a call of Do with measurements, a span and an event.
func observed[T any](ctx context.Context, rt *Runtime, key string, fn func(context.Context) (T, error), c callOptions) (T, Outcome, error) {
	start := time.Now()
	namespace := namespaceOf(key)
	var span trace.Span
	if rt.tracer != nil {
		ctx, span = rt.tracer.Start(ctx, "idem.Do")
		if !span.IsRecording() {
			span = nil // a no-op or sampled-out span: spare the attributes
		}
	}
	var st callStats
	v, out, err := do(ctx, rt, key, fn, &c, &st)
	ev := CallEvent{Namespace: namespace, Outcome: out, Result: classify(err, ctx.Err()), Duration: time.Since(start),
		Wait: st.wait, Run: st.run, Fence: st.fence}
	if rt.opts.ObserveKeys {
		ev.Key = key
	}
	if span != nil {
		span.SetAttributes(
			attribute.String("idem.namespace", namespace),
			attribute.String("idem.outcome", out.String()),
			attribute.String("idem.result", ev.Result.String()),
			attribute.Bool("idem.waited", st.waited),
			attribute.Int64("idem.wait_us", st.wait.Microseconds()),
		)
		if st.fence != 0 {
			span.SetAttributes(attribute.Int64("idem.token", int64(st.fence)))
		}
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, ev.Result.String())
		}
		span.End()
	}
	if rt.opts.Observer != nil {
		rt.opts.Observer.OnCall(ev)
	}
	return v, out, err
}

// noteReply records the first reply to an observed request: how long it
// waited, if the shard parked it, and the fence of a Grant.
func (st *callStats) noteReply(rep actors.Reply) {
	if st == nil {
		return
	}
	if rep.Waited {
		st.wait, st.waited = time.Since(st.sent), true
	}
	if rep.Kind == actors.Grant {
		st.fence = rep.Token.Fence
	}
}

// noteLeft records a caller that gave up waiting (its context ended): it
// waited all that time.
func (st *callStats) noteLeft() {
	if st != nil {
		st.wait, st.waited = time.Since(st.sent), true
	}
}

// batchObserver adapts the Observer to the shards' batch events.
func batchObserver(o Observer) func(shard, ops, failed int, took time.Duration) {
	if o == nil {
		return nil
	}
	return func(shard, ops, failed int, took time.Duration) {
		o.OnStoreBatch(StoreBatchEvent{Shard: shard, Ops: ops, Failed: failed, Duration: took})
	}
}
