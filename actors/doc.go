// Package actors runs idem's shard actors on protoactor-go.
//
// It is the runtime's machinery, used by package idem: not an API for users
// of idem, and without a compatibility promise. It exports only what package
// idem needs.
//
// Every key belongs to one shard (see package keyshard). A shard is one
// protoactor actor and owns, on its one goroutine, the state of its keys.
// Three parts, a file or two each:
//
//   - the engine (state.go, step.go): the per-key logic as one pure
//     step, keyState.step(event) → effects (the transition function), with no I/O,
//     goroutine, channel, lock or clock. A key is claiming (a Claim is out
//     for a candidate caller), running (an owner here runs its function),
//     lost (it runs, but its lease was lost), finishing or releasing (the
//     owner's Complete or Release is out, or waits to be retried), or remote
//     (another instance holds it: re-claimed when the store wakes the shard,
//     or on a lease-aware timer if the wake-up is lost; with a store that
//     cannot wake, that timer is the poll, doubling up to
//     Config.PollInterval);
//   - the shell (shard.go, shell.go, ops.go, timers.go): the actor that turns
//     its messages into events and performs the effects (store operations,
//     timers, answers, the LRU);
//   - the set ([Set], set.go): the shards of a runtime and what package
//     idem calls.
//
// Callers that arrive for a key in any of these states are parked in the
// entry and answered by the actor when the key settles: no polling, and no
// store round trip per waiter. After a transient failure the owner's claim
// is released and exactly one parked caller claims the key afresh, as a new
// owner, and runs the function; a completed result or a permanent error goes
// to all of them.
//
// A key's record leaves the store through its shard: a Forget is the
// shard's own store operation, refused while the key has an entry; a
// runtime's Clear asks the shards which keys of a page it may delete
// ([Set.Clear]): a key with an entry is skipped, the others leave the LRU,
// and an entry created before the store's delete is done caches nothing.
// Neither brings a deleted result back into the LRU.
//
// The actor never blocks on I/O: store operations go through a group-commit
// [mailbox.Committer] per store partition (see store.Partitioner) to a
// [mailbox.Worker] of its own, and their results come back as ordinary
// messages. Stores that live in process
// ([store.InProcess]) are called inline. Completed records are kept, once
// validated, in a per-shard LRU that callers read without an actor hop.
//
// protoactor is used as it measured best (see "protoactor-go" in
// docs/architecture.md): a reply channel in each message instead of futures,
// a long-lived worker goroutine per mailbox, our own hash over cached PIDs,
// recover inside Receive with a resuming guardian, its logger kept quiet, and
// Poison to stop. Nothing of protoactor leaks out of this package.
package actors
