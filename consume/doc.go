// Package consume makes message consumers idempotent: a broker delivers a
// message at least once, and the consumer's effects happen once per message
// key. It is broker-neutral; an adapter (package consume/natsjs for NATS
// JetStream, consume/sqs for Amazon SQS, consume/river for River jobs)
// turns the broker's delivery into a [Delivery] and the [Verdict] back
// into the broker's acknowledgement.
//
// # One delivery, one decision
//
// [Handle] runs the handler through idem.Do under the message's scoped key
// ([HandleWith] through a [Runner] of the caller's instead) and decides
// what the adapter tells the broker:
//
//   - [Ack]: the handler ran and its result is stored, or the result (or a
//     run in flight that settled while this delivery waited) was already
//     there: a redelivery or a duplicate publish replays instead of running.
//   - [Retry], after [Verdict.Delay]: the handler failed with a transient
//     error or panicked (nothing is stored, the key is released, so the
//     redelivery runs it again; the delay grows with the delivery attempt,
//     bounded), or a run elsewhere holds the key past the settle time (the
//     delay is about what that holder's lease has left: a live holder
//     settles by then, a dead one's lease has expired and the next delivery
//     takes the key over). A store that is down, an overloaded or closed
//     runtime, are retried too, and so is a delivery whose context ended (a
//     consumer shutting down): never with no delay, so that a consumer left
//     running on a closed runtime does not spin on its messages. A message
//     whose result is not stored is never acknowledged.
//   - [Term]: the handler failed with a permanent error (idem.Permanent, or
//     the runtime's classifier): idem stores it, the broker is told to give
//     the message up, and a duplicate of the message replays the same error
//     and is given up too. A message that cannot be keyed (no id and no key
//     function) is given up by default as well (see Options.MissingKey):
//     running it without a key would give up the guarantee silently; so is
//     one whose key idem refuses to replay for another payload
//     (idem.ErrFingerprintMismatch, when fingerprints are given). An error
//     of the handler that only wraps such an idem error is transient, like
//     any other.
//
// A stored result that no longer decodes into the handler's type (the type
// changed between deployments) is acknowledged: the effect happened. The
// verdict carries the *idem.CodecError and a warning is logged.
//
// Shut down in this order: stop the broker's subscription (or drain it),
// then close the runtime. A runtime closed under a running subscription
// retries every delivery, with the backoff, until the subscription stops.
//
// The result is acknowledged only after it is stored. An acknowledgement
// lost on the way is harmless: the broker redelivers, and the redelivery
// replays the stored result.
//
// # Keys and scopes
//
// A message's key comes from the broker's message id, or from a key
// function of the adapter. Keys live in a scope, typically the stream or
// topic and the consumer group, so two consumer groups that each must see a
// message never share its key; see [Key] for the idem key built from both
// (a message key too long for idem, or holding a NUL byte, is replaced by
// its SHA-256 there). Deployments that share one idem store must not share
// scopes unless they mean to share keys: put what tells them apart (the
// broker's account, domain or cluster) into the scope.
//
// # What is not promised
//
// A handler is not a transaction: if its process dies after an effect and
// before its result is stored, the effect has happened and nothing records
// it; once the dead run's lease expires the next delivery runs the handler
// again. Effects that must not repeat even then need an idempotency key of
// their own downstream (pass the message key on), or, when the effect is
// rows in the PostgreSQL database of a pgstore store, a transaction that
// commits them with the stored result: [HandleWith] takes a [Runner] that
// runs the handler through pgtx.Do (consume/natsjs/natstx does it for NATS
// JetStream; consume/river's NewTxWorker does it for River jobs, with
// pgtx.Join and River's JobCompleteTx in one transaction).
//
// A result is replayed until its TTL ends (the runtime's, or idem.WithTTL
// in Options.CallOptions; 24h by default): a duplicate delivered after that
// runs again. Keep the TTL longer than the broker redelivers and producers
// retry.
package consume
