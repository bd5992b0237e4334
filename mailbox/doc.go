// Package mailbox holds what idem's shard actors need beyond protoactor's own
// mailbox:
//
//   - [Worker], a dispatcher that runs one actor's mailbox on one long-lived
//     goroutine, instead of protoactor's default of a new goroutine each time
//     an idle mailbox gets a message (measured: a request round trip fell
//     from about 5.8 µs to 1.6 µs);
//   - [Committer] and [IOWorker], group commit of store operations: at most
//     one batch in flight per shard, and the operations that arrive while it
//     is out form the next batch;
//   - [Gate], admission control: a bounded count of pending requests.
//
// Everything here is owned by exactly one shard; only [Gate] is shared with
// callers.
package mailbox
