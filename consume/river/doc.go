// Package river makes the work of River jobs (github.com/riverqueue/river,
// a job queue in PostgreSQL) happen once per idempotency key. River runs a
// job at least once: a job whose worker died is rescued and run again
// (Config.RescueStuckJobsAfter), a job that timed out or failed is retried,
// and the same work can be inserted as two jobs. A [Worker] wraps your
// work function into a river.Worker[T] that keys each job by its args and
// runs the work through package consume's decision logic:
//
//   - the key comes from the args (an IdempotencyKey method, see [Keyed])
//     or from Options.Key, scoped by the job's kind (Options.Scope);
//   - the work runs once per key: a retry, a rescued job or a duplicate job
//     finds the result stored and completes without running the work
//     (a run in flight elsewhere is waited for, up to the consumer's
//     Settle, and then the job is snoozed, without using up an attempt,
//     for what the holder's lease has left);
//   - a transient error is returned to River, which retries the job by its
//     retry policy (the key is released, so the retry runs the work);
//   - a permanent error (idem.Permanent) is stored and the job is
//     cancelled (river.JobCancel); a later job of the key replays the
//     error and is cancelled too, as is a job without a key.
//
// The policy is the consume.Consumer's (consume.Options: idem.Policy, the
// retry delays of a held key, MissingKey), as for the other front ends.
//
// It is a worker wrapper, not a River middleware: the transactional form
// needs the job itself, and a middleware does not reach the job's
// transaction.
//
// # What it adds over River's unique jobs
//
// River's unique jobs (InsertOpts.UniqueOpts) dedupe insertion: a second
// job with the same args (or by kind, queue, period) is not inserted while
// the first is in one of the unique states or within the period. That does
// not cover the effect: a job rescued after its worker died mid-work runs
// its work again, and so does a duplicate inserted once the first has left
// the unique states (completed and cleaned, or past the period), or
// inserted by a path that did not ask for uniqueness. idem dedupes the
// effect instead, by its key, for as long as the result's TTL: every job of
// the key, whenever inserted, replays the stored result (or permanent
// error) rather than running. Use both: unique jobs keep the queue small,
// idem keeps the effect single.
//
// # Crashes: plain and transactional
//
// A [NewWorker] worker runs the work through idem.Do: the effect, then its
// stored result, two writes. A worker killed between them leaves the
// effect made and the key held by a dead run; River rescues the job, and
// once the dead run's lease has ended its next run takes the key over and
// runs the work again: at most two effects per such crash. Give the idem
// lease a length under RescueStuckJobsAfter, so that a rescued job does
// not find the key still held.
//
// When the effect is rows in PostgreSQL, [NewTxWorker] closes the gap: the
// work gets a pgx.Tx in which the key's record is completed (pgtx.Join)
// and River's job is completed (river.JobCompleteTx), and the three commit
// together. A worker killed before the COMMIT leaves nothing (the rescued
// job runs the work once more, from the start); after it, the job is
// completed and nothing runs again: exactly one effect. River's tables,
// the idem store (a pgstore.Store) and the work's tables must be in one
// database, and the River client must use the riverpgxv5 driver.
//
// Shut down in this order: stop the River client, then close the idem
// runtime.
package river
