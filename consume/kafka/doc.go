// Package kafka runs Kafka consumer-group handlers once per record key,
// on github.com/twmb/franz-go: Kafka delivers at least once (a record is
// fetched again after a rebalance or a crash before its offset was
// committed, and a producer's retry can write it twice), and the
// handler's effects happen once. It adapts package consume to a kgo
// consumer group.
//
// A [Consumer] is one member of a group. For each record it:
//
//   - keys it by its Idempotency-Key header ([DefaultKeyHeader]), another
//     header ([HeaderKey]), the record key ([RecordKey]) or a function of
//     your own (Options.Key), scoped by topic and group (Options.Scope):
//     a record without a key is never run (see consume.Options.MissingKey:
//     by default it is given up, with a warning logged; with Retry it is
//     retried in place every MaxDelay, holding its partition);
//   - runs the handler through consume.HandleWith (idem.Do underneath, or
//     Options.Run in its place; package kafkatx runs it in a PostgreSQL
//     transaction), one record at a time per partition, the partitions in
//     parallel, so the order within a partition is kept;
//   - commits the record's offset only after its result is stored or
//     replayed: marked when the record is done, committed every
//     CommitInterval, when its partition is revoked, and when the consumer
//     stops; autocommit is off;
//   - on a transient error, or a key held by a run elsewhere, retries it in
//     place after the verdict's delay, its partition paused (no record
//     behind it is fetched meanwhile), up to InPlaceAttempts, then sends a
//     copy to the RetryTopic, if set, and commits it;
//   - on a permanent error (idem.Permanent, or the runtime's classifier)
//     produces a copy to the DeadLetterTopic, if set, with the Idem-*
//     headers (first topic, partition, offset, attempts, error), and
//     commits the record only once the copy is acknowledged; a copy that
//     cannot be produced is retried and the record is not committed.
//
// # Rebalances
//
// Rebalances wait only while a poll's records are handed to the
// partitions' goroutines (kgo.BlockRebalanceOnPoll). When a partition is
// revoked (or lost), its goroutine is fenced: nothing it finishes from
// then on is committed here. Its handler in flight is not interrupted: it
// goes on under idem and stores its result, and the partition's next
// owner, fetching the record again, waits for it (consume.Options.Settle)
// and replays it, or takes the key over once the run's lease ends. The
// offsets of the records done before the revocation are committed in the
// callback.
//
// # What is not promised
//
// A handler run through idem.Do makes its effect and then stores its
// result: a consumer killed between the two leaves the effect made and the
// key held until its lease ends; the next owner of the partition then runs
// the handler again (at most two effects per crash). When the effect is
// rows in the PostgreSQL database of a pgstore store, package kafkatx
// closes that gap. A record whose result is stored but whose offset is
// not yet committed is fetched again after a crash and replayed: no
// effect, some work.
//
// Shut down in this order: end Run's context (or Close), then close the
// idem runtime.
package kafka
