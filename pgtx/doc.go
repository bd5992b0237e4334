// Package pgtx runs a function once per idempotency key with its database
// work and the key's stored result in one PostgreSQL transaction: the work
// commits together with the result, or neither does.
//
// [idem.Do] guarantees one run at a time and one stored result, but a
// process that dies after its function's effect and before the result is
// stored leaves the key to be taken over and the function run again: the
// effect happens twice. When the effect is rows in the same PostgreSQL
// database as the store's records ([pgstore]), pgtx closes that gap:
//
//   - [Do] claims the key through the runtime exactly as idem.Do does (the
//     cache, duplicates waiting for the run, settle, lease renewal,
//     fingerprints), begins a transaction on the caller's pool, runs the
//     function in it, and completes the key's record inside that
//     transaction as its last statement before COMMIT. Waiters here and on
//     other instances are answered only once it has committed.
//   - [Join] does the same inside a transaction the caller already holds
//     and commits itself; the caller reports how its commit ended to
//     [Pending.Settle].
//
// What holds, by construction:
//
//   - The completion statement is fenced by the claim's owner and fence. If
//     the key was taken over (its lease ended while the function ran, and
//     another owner claimed it), the statement updates nothing: the
//     transaction rolls back, the function's work with it, and the caller
//     gets [idem.ErrLeaseLost].
//   - The runtime stops renewing the lease before the completion statement,
//     which locks the key's row until COMMIT; the transaction's
//     idle_in_transaction_session_timeout, statement_timeout and
//     lock_timeout are set to half the lease then, so an owner that stalls
//     after the statement (a paused process, a lost connection) is rolled
//     back by the server and the key is free for others within its lease.
//   - A COMMIT whose reply is lost is settled by reading the record back
//     once no transaction holds its row: completed with this claim's token
//     is success; anything else means nothing committed.
//   - The pool must reach the store's database: the first call on a pool
//     checks current_database() and the server's identity, and refuses
//     another database with an error wrapping pgstore.ErrOtherDatabase.
//     Nothing ever runs without the transaction.
//   - A transient error (or a panic) rolls the transaction back and
//     releases the key, as idem.Do does. A permanent error rolls the
//     function's work back too, then stores the error alone: the error is
//     what later calls replay, and work that produced an error is usually
//     work not to keep. Return [KeepWork](err) instead to commit the
//     function's work with the stored error (an attempt recorded in a
//     table, a refusal written to an audit log).
//
// The function runs under a context that carries its claim
// ([idem.ClaimFrom]): the fence, the attempt and whether it took the key
// over. Effects outside the transaction (a payment provider's API, a
// message) are not covered by it: pass the key and fence downstream, or
// write them to an outbox table in the transaction and publish from there
// (docs/effects.md).
//
// The runtime's store must be a *pgstore.Store; the transactions run at the
// pool's default isolation (Join: the caller's), which must be READ
// COMMITTED (PostgreSQL's default), as the store's own statements need:
// Do refuses a pool whose default_transaction_isolation is another before
// the function runs (checked with the database, once), and the completion
// refuses a transaction at another isolation (Join's caller's) with an
// error wrapping idem.ErrInvalidArgument, and the key is released. The completion names
// the store's table by its schema, so the pool's search_path does not
// matter.
package pgtx
