// Package natstx runs NATS JetStream handlers whose work is rows in
// PostgreSQL in one transaction with the message's idempotency record: a
// message's rows commit once, or not at all, whatever the crashes and
// redeliveries.
//
// A handler of package natsjs runs through idem.Do: it makes its effect,
// then the runtime stores its result, two writes. A consumer killed
// between them leaves the effect made and the key held by a dead run;
// once its lease ends the redelivery takes the key over and runs the
// handler again, and the effect happens twice. Here the handler gets a
// pgx.Tx, and the message's record is completed inside that transaction
// as its last statement before COMMIT (package pgtx, [pgtx.Do]); the
// message is acknowledged after the COMMIT. A consumer killed
//
//   - before the COMMIT leaves nothing: the server rolls the transaction
//     back; the redelivery takes the key over once the dead run's lease
//     has ended and runs the handler again, from the start;
//   - after the COMMIT, before the acknowledgement, leaves the rows and
//     the record: the redelivery replays the record and is acknowledged,
//     and the handler does not run.
//
// A run whose lease was lost while it ran (a consumer paused past its
// lease, another one taking the message over) finds the key taken at its
// completion: its transaction rolls back and the message is naked. A
// permanent error (idem.Permanent) rolls the handler's rows back, stores
// the error and terminates the message; [pgtx.KeepWork] commits them with
// the error instead. The rest is natsjs's: keys, progress reports, retry
// delays, the answers.
//
// # How it fits
//
// natsjs knows no database: [natsjs.Options.Run] is a hook (a
// consume.Runner) that makes each handler call in place of idem.Do. This
// package sets it to a call of pgtx.Do on the pool you give, which
// passes the transaction to the handler, and gives handlers the form
// [HandlerFunc], with the transaction as an argument. Build the adapter
// with [ForConsumer] (or [New]) instead of natsjs's, and leave Run unset.
//
// # Requirements
//
//   - The idem runtime's store must be a *pgstore.Store, and the pool the
//     handlers' transactions come from must reach the same database: the
//     record and the rows commit together only there. [New] and
//     [ForConsumer] check both, and refuse a pool on another database.
//   - Give the handlers a pool of their own, not the store's: a
//     transaction holds its connection while the handler runs, and would
//     starve the store's lease renewals.
//   - Keep a handler's transaction well within the runtime's lease: the
//     completion statement stops the renewals and sets the transaction's
//     idle, statement and lock timeouts to half the lease (see pgtx).
//   - The handler must not commit or roll back the transaction, nor keep
//     it past its return.
package natstx
