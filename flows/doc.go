// Package flows runs multi-step side-effecting jobs (charge a card, then send
// a receipt) that are safe to retry as a whole and step by step, on an
// idem [idem.Runtime].
//
// A flow is a list of steps over a state value S:
//
//	checkout := flows.Must(flows.New[Order]("checkout",
//		flows.Step("charge", charge).Idempotent(func(o Order) string { return "charge:" + o.InvoiceID }, flows.StepOptions{}),
//		flows.Step("receipt", sendReceipt).Idempotent(func(o Order) string { return "receipt:" + o.InvoiceID }, flows.StepOptions{}),
//	))
//	out, err := checkout.Run(ctx, rt, order, flows.RunOptions[Order]{IdempotencyKey: requestID, Namespace: tenant})
//
// # Guarantees
//
//   - Workflow level: with a key (RunOptions.IdempotencyKey or KeyFunc), a
//     second run returns the first run's output without running any step;
//     duplicates during a run wait for it (RunOptions.Settle) or fail with
//     idem.ErrConflict.
//   - Step level: an idempotent step runs once per key; a retry of the flow
//     replays its stored output instead of running it again. A flow rerun
//     after its process died (once the workflow's lease ended) skips every
//     idempotent step that completed.
//   - Atomic commitment: a step's result is stored only after its OnAfter
//     hooks pass. If the step or a hook fails, nothing is stored: a transient
//     error releases the step's key (the next run executes it), a permanent one
//     (idem.Permanent, or the step's or run's Classifier) is stored and
//     replayed.
//   - Reduce steps run an idempotent step per item of a slice in the state:
//     a retry re-runs only the items that did not complete.
//   - Waits are bounded: a duplicate run waits RunOptions.Settle, a step
//     StepOptions.Settle, else the run's, else the runtime's settle time;
//     with FailFast they do not wait.
//   - One policy: RunOptions and StepOptions embed idem.Policy (settle or
//     fail-fast, lease, renewal, TTL, classifier). A step's fields left zero
//     are its run's, and a run's are the runtime's.
//   - Keys are scoped with store.BuildKey by RunOptions.Namespace and Version,
//     so two tenants never share a key; each step's record carries a
//     fingerprint of the flow and step names, so a key reused by another flow
//     or step is an error (idem.ErrFingerprintMismatch), never a merge.
//
// [Flow.Result], [Flow.State], [Flow.StepResult] and [Flow.StepState] read
// a run's or a step's record by the keys Run uses, without running it.
//
// The state is stored with the runtime's codec (JSON by default), so it
// must round-trip through it: exported fields only.
package flows
