// Package mailbox is part of the runtime's machinery: package actors uses it
// to run idem's shard actors. It is not an API for users of idem and makes no
// compatibility promise; it exports only what package actors needs.
//
// It holds what the shard actors need beyond protoactor's own mailbox:
//
//   - [Worker], one long-lived goroutine that runs jobs in order: as the
//     dispatcher of one actor's mailbox, instead of protoactor's default of a
//     new goroutine each time an idle mailbox gets a message (measured: a
//     request round trip fell from about 5.8 µs to 1.6 µs), and as the
//     goroutine that runs a shard's store batches off the actor;
//   - [Committer], group commit of store operations: at most one batch in
//     flight per shard, and the operations that arrive while it is out form
//     the next batch;
//   - [Gate], admission control: a bounded count of pending requests.
//
// Everything here is owned by exactly one shard; only [Gate] is shared with
// callers.
package mailbox
