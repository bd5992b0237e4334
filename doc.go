// Package idem makes side effects happen once per idempotency key.
//
// Services get retried requests, duplicate webhooks and at-least-once
// deliveries. idem sits in front of the side effect: [Do] runs a function
// once for a key; callers that arrive while it runs wait for its result (or
// fail fast with [ErrConflict], see [WithSettle] and [WithFailFast]); later
// callers get the stored result back without running anything, until it
// expires.
//
//	rt, err := idem.New(idem.Options{})
//	...
//	receipt, err := idem.Do(ctx, rt, "charge:order-1", func(ctx context.Context) (Receipt, error) {
//		return gateway.Charge(ctx, order)
//	}, idem.WithTTL(24*time.Hour), idem.WithSettle(3*time.Second))
//
// # How it works
//
// Each key hashes to one of a fixed set of shard actors (package actors, on
// protoactor-go: the runtime's machinery, not an API), which serializes
// claim, complete and release for its keys and
// parks duplicate callers until the owner settles: they are woken by the
// actor, never by polling. Completed results sit in a per-shard LRU in front
// of the [store.Store]: in memory by default (store/memstore), shared across
// instances by a store such as Redis.
//
// # Policy
//
// How long a duplicate waits (or that it fails fast), the lease and its
// renewal, how long a result is kept and which errors are kept like results
// are one value, [Policy]: in the runtime's [Options], in every front end's
// options (packages flows, cqrs, httpidem, consume), and per call
// ([WithPolicy] and the options for one field). A field left zero inherits:
// call, then front end, then runtime, then the built-in default.
//
// # Errors
//
// Errors that fn returns are transient unless marked with [Permanent] (or
// matched by the policy's Classifier, [WithClassifier]): a transient error
// stores nothing and hands the key to one waiting caller; a permanent one
// is stored and replayed. The runtime's own errors are sentinels with typed details:
// [ErrConflict] ([*ConflictError]), [ErrFingerprintMismatch], [ErrLeaseLost],
// [ErrClosed], [ErrOverloaded], [ErrInvalidKey], [ErrInvalidArgument],
// [ErrStoreUnavailable] ([*StoreError]), [ErrNotFound], [ErrInProgress],
// plus [*PanicError], [*CodecError] and [*ReplayedError]; errors.Is and
// errors.As work on all of them. A permanent error replayed from the store
// matches its original with errors.Is or errors.As on every instance when
// its sentinel or type is registered ([RegisterError],
// [RegisterErrorType]).
//
// # Looking inside
//
// [Get] reads a key's stored result without running anything,
// [Runtime.State] its state (absent, in progress, completed, failed), and
// [Runtime.Forget] and [Runtime.Clear] delete one result or those of a
// whole namespace or version.
//
// See docs/semantics.md for every rule and docs/architecture.md for the
// design.
package idem
