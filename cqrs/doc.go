// Package cqrs is a small command bus with pipeline behaviours, and the
// idempotency behaviour that runs each command once per request id.
//
// # The bus
//
// Register one handler per message type with [HandleCommand] (commands
// change state) or [HandleQuery] (queries only read), then send messages
// with [Dispatch], which names the result type and infers the message type:
//
//	var bus cqrs.Bus
//	_ = cqrs.HandleCommand(&bus, func(ctx context.Context, c PlaceOrder) (Order, error) { ... })
//	order, err := cqrs.Dispatch[Order](ctx, &bus, PlaceOrder{SKU: "book"})
//
// The zero Bus is ready to use. Behaviours added with [Bus.Use] wrap every
// message, commands and queries alike, outermost first; each sees the
// [Message] (its [Kind], type name and value) and calls next to go on.
//
// # Idempotency
//
// [Idempotency] is the behaviour that makes commands idempotent
// (docs/cqrs.md has the whole table). It takes the request id and tenant
// from the context ([WithRequestID], [WithTenant], or [ContextFromHeaders]
// for an HTTP request) and, for a command:
//
//   - if the command was processed, returns the stored result without
//     calling the handler;
//   - if another holder has the lock, fails at once with an error that
//     matches idem.ErrConflict (no waiting, unless the options' Settle
//     says to wait for the holder's result);
//   - otherwise runs the rest of the pipeline; a success is stored for
//     ProcessedTTL (default 24h) and the lock released; a failure (any
//     error, even one marked idem.Permanent) stores nothing and releases the
//     lock, so a retry runs the handler again. A panic does the same and
//     reaches the caller as an *idem.PanicError.
//
// The lock is an idem lease of LockTTL (default 60s) that is not renewed: a
// lock with a TTL. A holder that has not finished within it, crashed or
// hung in a live process, is taken over by the next dispatch, and its own
// late result is refused with idem.ErrLeaseLost. The command bus keeps its
// domain's words: IdempotencyOptions embeds idem.Policy, and LockTTL is
// another name of its Lease (a hard one: never renewed), ProcessedTTL of
// its TTL. These defaults are the behaviour's own, not its runtime's.
// Queries pass through untouched. A command without a request id fails with
// [ErrNoRequestID], unless IdempotencyOptions.Optional lets it run without
// idempotency.
//
// # Keys
//
// [Key] maps a tenant and a request id onto one idem key:
// idempotency_lock:tenant:<tenant>:command:<id>, or
// idempotency_lock:command:<id> without a tenant. The tenant and the id are
// escaped ('%' as %25, ':' as %3A), so no two (tenant, id) pairs share a
// key: the same request id in two tenants runs twice, once in each. idem
// keeps a key's lock and its processed payload in one record, so the
// idempotency_processed:... key of a two-key design has no separate
// existence here: the record under the lock key holds both (see
// docs/cqrs.md).
//
// [Idempotency.Processed], [Idempotency.Payload] and [Idempotency.Forget]
// read and delete a command's record by tenant and request id, on the
// behaviour's runtime, its private one too.
//
// With no runtime configured, the behaviour owns an idem runtime on the
// in-memory store (close it with [Idempotency.Close]); give it a runtime on
// the Redis store (store/redisstore) and every service instance shares the
// same guarantee.
package cqrs
