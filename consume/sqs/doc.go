// Package sqs runs Amazon SQS message handlers once per message key: SQS
// delivers at least once (again after a visibility timeout that ran out,
// a standard queue now and then on its own, and a message sent twice by a
// producer that retried), and the handler's effects happen once. It adapts
// package consume to github.com/aws/aws-sdk-go-v2/service/sqs.
//
// An [Adapter] receives and handles a queue's messages ([Adapter.Run]:
// long polling, a bounded number handled at once), or handles one message
// of a receive loop of yours ([Adapter.Process]). For each message it:
//
//   - keys it by the message attribute the producer sets
//     (Idempotency-Key, [KeyAttribute], by default), or else, on a FIFO
//     queue, by its MessageDeduplicationId within its message group
//     ([DeduplicationID]), or by Options.Key, scoped by
//     the queue's URL (Options.Scope). The message id is no key for a
//     producer's retries: SQS gives every send a new id, so [MessageID]
//     catches only redeliveries. A message without a key is never run (see
//     consume.Options.MissingKey; by default it is given up as below);
//   - runs the handler through consume.HandleWith (idem.Do underneath, or
//     Options.Run's call in its place), and while it runs (or waits for a
//     duplicate in flight) extends the message's visibility timeout every
//     Options.Extend (ChangeMessageVisibility), so that SQS does not hand it
//     to another consumer meanwhile; never past Options.MaxVisibility after
//     the receive, as SQS allows 12 hours at most;
//   - deletes the message only after its result is stored, or replayed
//     (a duplicate); a delete lost on the way has the message received
//     again, and that receive replays the result;
//   - on a transient error, or a key held by a run elsewhere, sets its
//     visibility timeout to the verdict's delay (consume's backoff, in
//     whole seconds, rounded up), so that it comes back then; when the
//     context ends (a shutdown) or the runtime is closed, the same with the
//     backoff;
//   - on a permanent error, deletes it (Options.OnPermanent Delete, the
//     default) or leaves it (Leave) for the queue's redrive policy to move
//     to its dead-letter queue after maxReceiveCount receives: every
//     receive of it replays the stored error, the handler never runs again.
//
// On a FIFO queue, Run processes the messages of a message group that one
// receive returns in order, one after the other, and gives back those
// after a message that is not done with (retried, or left), unrun, so
// that a retry never lets a later message of its group run first.
//
// The attempt that grows the retry delay is ApproximateReceiveCount. A
// queue's redrive policy counts every receive, those given back for a
// retry or a held key too: leave room for them in maxReceiveCount.
//
// A handler run through idem.Do makes its effect and then stores its
// result: a consumer killed between the two leaves the effect made and
// the key held until its lease ends; the message comes back after its
// visibility timeout, and once the lease has ended runs again (at most two
// effects). Give the idem lease a length close to the visibility timeout.
// Effects that must not repeat even then need Options.Run with pgtx (rows
// in the store's PostgreSQL database), or a key of their own downstream.
//
// Shut down in this order: stop Run (cancel its context and wait for it),
// then close the idem runtime.
package sqs
