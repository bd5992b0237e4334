// Package handoff names the places where the work of a call passes from one
// goroutine to another, so that a test can count them (see
// handoff_count_test.go in the root package and the section "Hand-offs of
// an executed Do" of docs/architecture.md).
//
// A hand-off is a channel send, an actor message, a job for a worker or a
// go statement that another goroutine acts on: each costs a wake-up of that
// goroutine when it is idle, a few microseconds on a quiet machine. Every
// [Point] has a reason in its comment; a hand-off without one should go.
//
// [Note] is called just before the hand-off it names, so that the notes of
// one call come in the order its hand-offs happen: each goroutine notes
// before it hands over, and the next one notes only after.
//
// Noted are the hand-offs of the calls of Do and the shard's own events.
// Not noted: Forget, Clear, Close and probes; the mailbox run behind a
// message (one per message that finds the mailbox idle, the same hop); and
// hand-offs inside a store's client, such as the goroutine per node that
// go-redis starts for each pipeline on a Redis Cluster.
package handoff

import "sync/atomic"

// Point is a kind of hand-off.
type Point uint8

// The hand-offs of the path of a call, and of the shard's own events.
const (
	// Request: caller → shard. A call that found nothing in the LRU sends
	// its Request to the key's shard actor (actors.Shard.Send), whose
	// goroutine wakes if its mailbox was idle. Why: the shard's goroutine
	// alone holds the key's state (owner, waiters, timers), so every call
	// of a key is ordered there without a lock.
	Request Point = iota + 1

	// Reply: shard → caller. The shard answers a Request on its reply
	// channel, where the caller (or the owner waiting for the answer to its
	// Finish) is blocked: a Grant, a settled result, or a failure. Why:
	// only the shard knows the answer (it comes out of the key's state).
	Reply

	// Run: caller → owner goroutine. An owner whose context can be
	// cancelled runs its function on a goroutine of its own (go o.run), so
	// that Do returns ctx.Err() at once when ctx ends while the function
	// goes on for the callers waiting for it. A context that cannot be
	// cancelled (or WithOwnerWaits) runs it on the caller's goroutine, with
	// no hand-off.
	Run

	// Finish: owner → shard. The owner tells the shard how its function
	// ended (actors.Shard.Finish). Why: the shard must learn that the key
	// settled, to keep the result in the LRU, answer the waiters, drop the
	// renewal and forget the key; on a store that does not let owners
	// complete, it also sends the Complete. Nobody waits for it when the
	// owner completed the key itself.
	Finish

	// OwnerAnswer: owner goroutine → caller. With a store that lets owners
	// complete (store.OwnerCompleter), an owner that ran on a goroutine of
	// its own (Run) answers its caller itself once the store has the
	// result. On the caller's own goroutine the answer is no hand-off and
	// is not noted.
	OwnerAnswer

	// Batch: shard → I/O worker. The shard hands a batch of store
	// operations to its partition's I/O worker (mailbox.Worker.Submit).
	// Why: the actor never blocks on I/O; the batch is one round trip for
	// every operation gathered while the previous one was out.
	Batch

	// BatchDone: I/O worker → shard. The worker sends a finished batch's
	// results back to the shard as a message. Why: they change the keys'
	// state, which only the shard's goroutine holds.
	BatchDone

	// Abandon: caller → shard. A caller whose context ended tells the shard
	// it left, so that it is not answered, handed the key, or counted.
	Abandon

	// Tick: timer goroutine → shard. The shard's one armed clock timer
	// fired (a settle deadline, a renewal, a re-claim, a retry). An armed
	// timer outlives the deadline it was armed for: it is not stopped when
	// that key settles, only re-armed when an earlier deadline comes, so a
	// run of calls costs one clock timer per shard, not one each, and at
	// most one tick that finds nothing due.
	Tick

	// Wake: store subscription → shard. The store said that a key this
	// instance waits for, held by another instance, settled.
	Wake

	nPoints
)

var names = [nPoints]string{
	Request:     "Request",
	Reply:       "Reply",
	Run:         "Run",
	Finish:      "Finish",
	OwnerAnswer: "OwnerAnswer",
	Batch:       "Batch",
	BatchDone:   "BatchDone",
	Abandon:     "Abandon",
	Tick:        "Tick",
	Wake:        "Wake",
}

func (p Point) String() string {
	if p > 0 && p < nPoints {
		return names[p]
	}
	return "Point(?)"
}

var hook atomic.Pointer[func(Point)]

// Note tells the hook, if one is set, that a hand-off at p is about to
// happen. Unset, it costs one atomic load.
func Note(p Point) {
	if f := hook.Load(); f != nil {
		(*f)(p)
	}
}

// Set makes f the hook that every Note calls, from the goroutine that
// hands off (nil: none), and returns a function that puts the previous
// hook back. It is for tests that run alone: the hook is global.
func Set(f func(Point)) (restore func()) {
	var p *func(Point)
	if f != nil {
		p = &f
	}
	old := hook.Swap(p)
	return func() { hook.Store(old) }
}
