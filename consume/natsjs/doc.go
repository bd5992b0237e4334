// Package natsjs runs NATS JetStream message handlers once per message
// key: JetStream delivers at least once (a redelivery after a lost or late
// acknowledgement, a duplicate publish past the stream's duplicate window),
// and the handler's effects happen once. It adapts package consume to the
// jetstream package of github.com/nats-io/nats.go.
//
// An [Adapter] wraps a [HandlerFunc] into a jetstream.MessageHandler for
// Consumer.Consume ([Adapter.Handler]), or handles one message from a
// Messages().Next() or Fetch loop ([Adapter.Process]). For each message it:
//
//   - keys it by its Nats-Msg-Id header (the id JetStream's own duplicate
//     window uses), or by Options.Key, scoped by stream and consumer name
//     (Options.Scope): a message without a key is never run (see
//     consume.Options.MissingKey; by default it is terminated, with a
//     warning logged);
//   - runs the handler through consume.HandleWith (idem.Do underneath, or
//     the Options.Run hook's call in its place), and
//     while it runs (or waits for a duplicate in flight) tells the server
//     the message is in progress every Options.Progress, a third of the
//     consumer's AckWait by default, so the server does not redeliver it to
//     another consumer meanwhile;
//   - acknowledges the message only after its result is stored (Ack, or
//     DoubleAck with Options.DoubleAck); an acknowledgement lost on the way
//     makes the server redeliver, and the redelivery replays the result;
//   - on a transient error, or a key held by a run elsewhere, naks it with
//     the verdict's delay (NakWithDelay); when the context ends (the consumer
//     is shutting down) or the runtime is closed, naks it with the backoff
//     (MinDelay for a first delivery), for another consumer, never at once;
//   - on a permanent error terminates it: the server never redelivers it,
//     and a duplicate of it is terminated too. The Term carries the error
//     as its reason (TermWithReason) only when Options.Conn shows a server
//     that honours it, 2.10.4 or later; older servers ignore such a Term
//     (the message would come back after every AckWait), and get a plain
//     Term. Every server from 2.9 is supported (see docs/consumers.md,
//     "JetStream server versions"). JetStream
//     keeps no dead-letter queue: a Term only publishes an advisory on
//     $JS.EVENT.ADVISORY.CONSUMER.MSG_TERMINATED.<stream>.<consumer>, with
//     the stream sequence and the reason. To keep terminated messages,
//     subscribe to it and copy each message (read by its sequence) to a
//     stream of your own; the message stays in a limits-based stream until
//     its MaxAge, and may be gone from a work-queue or interest stream.
//
// The consumer must acknowledge explicitly (AckExplicitPolicy; see
// [ForConsumer]): AckAll and AckNone (ordered) consumers lose the messages
// that are retried or terminated.
//
// Use a durable consumer: the default scope is its name, so an ephemeral
// consumer (a new name each time) would not see the keys of the one before
// it. Give the idem runtime's lease a length close to AckWait: a consumer
// that dies mid-handler holds its keys until its lease ends, and the
// redelivery of its message waits (with naks delayed by the lease left)
// until then.
//
// Every delivery counts against the consumer's MaxDeliver, the naks of a
// message whose key is held elsewhere too: with a MaxDeliver, leave room
// for them (or use -1, no limit, and rely on Term for messages that must
// stop). Consume calls the handler of one message at a time, so a duplicate
// that waits for a run in flight (consume.Options.Settle) holds up the
// messages behind it meanwhile: keep Settle short for busy consumers.
// Consume also pulls messages ahead into a buffer (PullMaxMessages, 500 by
// default), and only the message being handled is reported in progress: a
// message that waits in the buffer past AckWait is redelivered, and
// handled twice (a run and a replay). Keep PullMaxMessages times the
// handler's usual time under AckWait.
//
// A handler run through idem.Do makes its effect and then stores its
// result: a consumer killed between the two leaves the effect made and
// the key to be taken over, and the redelivery runs the handler again.
// When the effect is rows in the PostgreSQL database of the runtime's
// store (a pgstore.Store), package natstx closes that gap: its handlers
// get a transaction that commits their rows with the message's record
// (pgtx.Do, plugged in through Options.Run), so this package imports no
// database driver.
//
// Shut down in this order: stop (or drain) the subscription, then close the
// idem runtime.
package natsjs
