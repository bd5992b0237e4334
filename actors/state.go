package actors

// The engine's per-key state, the events that move it, and the effects a
// move asks for. The transition function itself is in step.go; the shard
// actor (shard.go, shell.go) turns its messages into events, calls it, and
// performs the effects.
//
// Nothing in state.go and step.go does I/O, starts a goroutine, touches a
// channel, reads a clock or takes a lock: events carry the time and the
// shard's facts (closing), and everything the shard must do is an effect.
// That is what lets step_test.go drive every row of the store contract
// against every local situation without a store, an actor or a clock.

import (
	"time"

	"github.com/idemrt/idem/store"
)

// phase is where a key with callers in flight stands.
type phase uint8

const (
	phNew       phase = iota // just created: the first caller's arrival claims it
	phClaiming               // a Claim is out for keyState.owner (the candidate)
	phRunning                // keyState.owner runs its function
	phLost                   // the owner still runs, but a renewal found its lease lost
	phFinishing              // the owner's Complete is out, or waits to be retried
	phReleasing              // the owner's Release is out, or waits to be retried
	phRemote                 // another instance holds the key
)

// keyState is the engine's state for one key with callers in flight.
type keyState struct {
	key   string
	phase phase
	// owner is the candidate while claiming, the owner from its grant until
	// its run is over.
	owner   *Request
	token   store.Token
	fp      []byte        // the holder's fingerprint, when known
	lease   time.Duration // the lease of this shard's claim
	ttl     time.Duration
	leaseAt time.Time     // when this shard's claim was granted or last renewed; remote: when seen
	left    time.Duration // remote: the lease the holder had left when seen
	holder  string        // remote: the holder's owner when seen, if the store says
	waiters []*Request
	backoff time.Duration
	// settleAt is when the settle timer is armed for (zero: not armed).
	settleAt time.Time
	// joined: the key was seen in progress elsewhere, so its callers joined
	// a run rather than found a result.
	joined bool
	// woken: a store wake-up came while a claim was out.
	woken bool
	// askedAgain: a claim found a record that had ended meanwhile and was
	// sent again (once: a store whose records all seem ended, by a clock
	// ahead of ours, is not asked for ever).
	askedAgain bool
	// noCache: the key was created while a Clear deletes it (see
	// ClearPage): what it finds or stores may be what the Clear deletes, so
	// nothing is cached.
	noCache bool
	// ownCodec: the owner's result was encoded with a codec of its caller's
	// own, whose encoding the LRU keeps (see Cached.one).
	ownCodec bool

	// The owner's result from its Finish until the store has it: kept, and
	// offered again after a retryable failure, until the store stores it or
	// says another owner holds the key, or its TTL runs out.
	result     Cached
	finishedAt time.Time
	ownerReply Reply // the owner's answer once its Release is done
	// retryArmed: the Complete or Release failed and waits for its retry
	// timer (none is out).
	retryArmed bool
	// shrunk: the result was refused for its size and replaced by a
	// small permanent error (see stepConfig.oversized); reset when the
	// key is granted to the next run.
	shrunk bool

	// The key's two timers, kept by the shard in its heap: the phase's
	// timer (renewal, re-claim, retry or lease end) and the earliest settle
	// deadline of its callers.
	timer       timerItem
	settleTimer timerItem

	ops int // store operations of the key in flight (shell bookkeeping)
}

// eventKind names what happened to a key.
type eventKind uint8

const (
	evArrive    eventKind = iota + 1 // a caller asks for the key (req)
	evLeave                          // a caller stopped waiting (req)
	evFinish                         // the owner's function ended (fin)
	evQuiet                          // the owner stores its result itself: no more renewals (req)
	evClaimed                        // a Claim came back (op)
	evCompleted                      // a Complete came back (op)
	evReleased                       // a Release came back (op)
	evRenewed                        // a Renew came back (op)
	evTimer                          // the key's phase timer fired (timer)
	evSettle                         // the key's settle timer fired
	evWake                           // the store says the key may have settled
	evClose                          // the runtime is closing
	evStop                           // the shard is stopping: answer everyone now
)

// event is one input of the transition function. now is the shard's time
// when the event is handled; closing is whether the runtime is closing.
type event struct {
	kind    eventKind
	now     time.Time
	closing bool
	req     *Request  // evArrive, evLeave, evQuiet
	fin     *Finish   // evFinish
	op      *store.Op // evClaimed, evCompleted, evReleased, evRenewed
	sent    time.Time // the op's: when the shard sent it
	timer   timerKind // evTimer
	// own: evClaimed that found the key completed: the LRU's copy of that
	// very result, when it holds one (a direct owner of this process
	// cached it with its value itself), to answer with instead of the
	// store's record.
	own *Cached
}

// effects is what one step asks the shard to do, in order of kind: send
// these store operations, (re)arm or cancel these timers, stop these runs,
// answer these callers, cache this result, log these warnings, and forget
// the key. The shard keeps one and reuses its memory.
type effects struct {
	ops     []opEffect
	timers  []timerEffect
	stops   []stopEffect
	answers []answer
	// broadcasts answer many callers alike (a key's waiters): the shard
	// sends rep to each, drops its hold on them if it settles them, and
	// keeps the slice for another key's waiters.
	broadcasts []broadcast
	drops      []*Request // requests the shard holds no more (see pooled)
	cache      *Cached    // the key's validated terminal result, to keep (in its state)
	warns      []warning
	waiters    int  // change in the number of parked callers (for Stats)
	done       bool // the key has no callers left: forget its state
}

func (fx *effects) reset() {
	clear(fx.answers)
	clear(fx.broadcasts)
	clear(fx.stops)
	clear(fx.drops)
	clear(fx.ops) // their records hold results: keep none alive
	*fx = effects{
		ops: fx.ops[:0], timers: fx.timers[:0], stops: fx.stops[:0],
		answers: fx.answers[:0], drops: fx.drops[:0], warns: fx.warns[:0],
		broadcasts: fx.broadcasts[:0],
	}
}

// opEffect asks the shard to send one store operation for the key. Claim
// owners and the waker id are the shard's to fill in.
type opEffect struct {
	kind   store.OpKind
	lease  time.Duration // OpClaim, OpRenew
	ttl    time.Duration // OpClaim, OpComplete
	fp     []byte        // OpClaim
	holder string        // OpClaim: the owner last seen holding the key ("" if none)
	token  store.Token   // OpComplete, OpRelease, OpRenew
	record store.Record  // OpComplete
}

// timerEffect arms one of the key's timers at at, or cancels it (zero at).
type timerEffect struct {
	settle bool // the settle timer, else the phase timer
	kind   timerKind
	at     time.Time
}

// stopEffect cancels an owner's run with cause.
type stopEffect struct {
	req   *Request
	cause error
}

// answer is one reply to one caller.
type answer struct {
	req *Request
	rep Reply
}

// broadcast is one reply to many callers.
type broadcast struct {
	reqs []*Request
	rep  Reply
}

// warning is a line for the runtime's logger.
type warning struct {
	msg   string
	err   error
	store bool // a store failure: rate-limited by the shard
	op    string
}
