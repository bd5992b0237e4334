package actors

// The transition function of a key: step(state, event) → effects. It is
// pure (see state.go): the shard performs what it asks for.
//
// The store contract (package store) has four operations against four
// states; the engine meets them as follows:
//
//   - Claim: claimed → the candidate is granted the key (or, if it left or
//     the runtime closes, the claim is released for the next caller);
//     completed → the record settles the candidate and every waiter;
//     in progress → the key is held elsewhere: the callers wait for a
//     wake-up or the re-claim timer; a failure fails them all.
//   - Complete: stored → the owner and every waiter get the record; lease
//     lost → the next waiter claims afresh; a retryable failure → the
//     result is kept and offered again with backoff until the store answers
//     (bounded by its TTL and by Close); a result too large for the store
//     (store.ErrTooLarge) → a small permanent error is stored in its place
//     for the owner and every waiter (the function ran: the key is never
//     released for another run); any other refusal is final.
//   - Release: done or lease lost → the next waiter claims; a retryable
//     failure → retried while the lease lasts.
//   - Renew: renewed → next renewal a third of the lease later; lease lost
//     → the owner's run is stopped and its result refused; a failure, or
//     no answer yet when the lease ends by the local clock → retried, and
//     the run is stopped once the lease may have ended, its result still
//     offered.

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/idemrt/idem/store"
)

// stepConfig is what a shard's configuration tells the transition
// function: how it re-claims a key held elsewhere.
type stepConfig struct {
	pollMost   time.Duration // the longest wait between re-claims, without wake-ups
	waker      bool          // the store wakes waiters: re-claim timers are a safety net
	maxWaiters int           // callers one key may park (0: no bound of its own)
	// oversized replaces a result the store refused for its size (see
	// Config.Oversized); nil: such a refusal is final, as any other.
	oversized func(key string, refused store.Record, err error) (store.Record, error)
}

// step moves k by ev and appends to fx what the shard must do.
func (k *keyState) step(cfg *stepConfig, ev event, fx *effects) {
	m := mover{k: k, cfg: cfg, ev: ev, fx: fx, now: ev.now}
	switch ev.kind {
	case evArrive:
		m.arrive(ev.req)
	case evLeave:
		m.leave(ev.req)
	case evFinish:
		m.finish(ev.fin)
	case evQuiet:
		m.quiet(ev.req)
	case evClaimed:
		m.claimed(ev.op, ev.sent)
	case evCompleted:
		m.completed(ev.op)
	case evReleased:
		m.released(ev.op)
	case evRenewed:
		m.renewed(ev.op, ev.sent)
	case evTimer:
		m.timerDue(ev.timer)
	case evSettle:
		m.settleDue()
	case evWake:
		m.wake()
	case evClose:
		m.close()
	case evStop:
		m.stop()
	}
}

// mover is one step in progress.
type mover struct {
	k   *keyState
	cfg *stepConfig
	ev  event
	fx  *effects
	now time.Time
}

// staleFinish answers the Finish of an owner the key no longer has: the
// engine let it go (its hard lease ended) or the runtime is closing.
// Nothing can be stored for it, unless it stored the result itself.
func staleFinish(f *Finish, fx *effects) {
	r := f.Req
	switch {
	case f.Stored:
		fx.drops = append(fx.drops, r) // it has its answer
	case r.expired:
		answerTo(fx, r, Reply{Kind: FailLeaseLost, Op: store.OpComplete, Err: store.ErrLeaseLost})
	default:
		answerTo(fx, r, Reply{Kind: FailClosed})
	}
}

// answerTo appends r's reply to fx, unless its caller left. A settled
// result is the request's last reply: the shard drops its hold on it.
func answerTo(fx *effects, r *Request, rep Reply) {
	if r.where != gone {
		r.where = nowhere
		rep.Waited = r.waited
		fx.answers = append(fx.answers, answer{req: r, rep: rep})
	}
	if rep.Kind == Settled {
		fx.drops = append(fx.drops, r)
	}
}

func (m *mover) answer(r *Request, rep Reply) { answerTo(m.fx, r, rep) }

func (m *mover) warn(msg string, err error) {
	m.fx.warns = append(m.fx.warns, warning{msg: msg, err: err})
}

func (m *mover) warnStore(op string, err error) {
	switch {
	case store.IsContract(err):
	case errors.Is(err, store.ErrTooLarge):
		// Refused for its size, unsent: no failure of the store, and not
		// to use up its once-a-second warning (a store outage right after
		// would go unlogged). A claim's is its caller's argument (its
		// fingerprint), answered to it; a result's is logged on its own.
		if op != "claim" {
			m.warn("idem: the store refused a "+op+" for its size", err)
		}
	default:
		m.fx.warns = append(m.fx.warns, warning{store: true, op: op, err: err})
	}
}

func (m *mover) send(o opEffect) { m.fx.ops = append(m.fx.ops, o) }

func (m *mover) arm(kind timerKind, at time.Time) {
	m.fx.timers = append(m.fx.timers, timerEffect{kind: kind, at: at})
}

func (m *mover) disarm() { m.fx.timers = append(m.fx.timers, timerEffect{}) }

func (m *mover) forget() { m.fx.done = true }

// mismatch reports whether two fingerprints are both set and differ.
func mismatch(a, b []byte) bool {
	return len(a) > 0 && len(b) > 0 && !bytes.Equal(a, b)
}

// arrive admits a caller: the first one claims the key, the others wait.
func (m *mover) arrive(r *Request) {
	k := m.k
	if r.pre {
		m.adopt(r)
		return
	}
	switch k.phase {
	case phNew:
		k.owner, r.where = r, claiming
		m.claim()
		return
	case phRunning, phLost, phFinishing, phRemote:
		if mismatch(k.fp, r.Fingerprint) {
			m.answer(r, Reply{Kind: FailMismatch})
			return
		}
		if r.Settle == 0 && !m.leaseEnded() {
			m.answer(r, m.conflict())
			return
		}
	case phReleasing:
		// A failed owner's claim is being released: the key is still held.
		// The fingerprint is checked against the next owner's.
		if r.Settle == 0 {
			m.answer(r, m.conflict())
			return
		}
	}
	if m.cfg.maxWaiters > 0 && len(k.waiters) >= m.cfg.maxWaiters {
		// One hot key may not take its whole shard's admission.
		m.answer(r, Reply{Kind: FailOverloaded})
		return
	}
	m.park(r)
	if m.leaseEnded() {
		m.letGo()
	}
}

// adopt makes r the key's owner: its caller claimed the key in an
// in-process store on its own goroutine, was granted it there and runs
// already (see Set.claimHere), so it is not answered. The store's claim is
// the truth: callers parked behind another instance's holder (their claims
// raced r's) now wait for r; an owner here whose lease ended, which the
// store let r take over, is let go as when a caller finds its hard lease
// over (see letGo), and its result will be refused.
func (m *mover) adopt(r *Request) {
	k := m.k
	if k.phase != phNew && k.phase != phClaiming && k.token.Fence > r.preToken.Fence {
		// The key's holder, here or elsewhere, claimed it after r: r's
		// lease ended before the shard heard of it (the clock leapt, or
		// the shard was held up), and its result will be refused.
		if !r.preGranted {
			m.answer(r, Reply{Kind: FailLeaseLost, Op: store.OpClaim, Err: store.ErrLeaseLost})
			return
		}
		r.expired = true
		m.fx.stops = append(m.fx.stops, stopEffect{req: r, cause: store.ErrLeaseLost})
		return
	}
	switch k.phase {
	case phClaiming:
		// Not seen with an in-process store (its claims are answered
		// before the next message); the candidate waits first in line.
		c := k.owner
		k.owner = nil
		c.where = parked
		k.waiters = append([]*Request{c}, k.waiters...)
		m.armSettle(c)
		m.fx.waiters++
	case phRunning, phLost:
		old := k.owner
		old.expired = true
		m.fx.stops = append(m.fx.stops, stopEffect{req: old, cause: store.ErrLeaseLost})
		m.warn("idem: a function outlived its lease; the key was taken over", nil)
	case phFinishing, phReleasing:
		// The result of the last run waits for a retry of its Complete
		// (or its claim for a retried Release): the store has given the
		// key to r since, so neither can succeed any more.
		if old := k.owner; old != nil {
			rep := Reply{Kind: FailLeaseLost, Op: store.OpComplete, Err: store.ErrLeaseLost}
			if k.phase == phReleasing && k.ownerReply.Kind != 0 {
				rep = k.ownerReply
			}
			m.answer(old, rep)
		}
		k.result, k.ownerReply, k.retryArmed = Cached{}, Reply{}, false
	}
	k.phase = phRunning
	k.owner = r
	r.where = owning
	k.token, k.lease, k.leaseAt = r.preToken, r.Lease, r.preAt()
	k.ttl, k.fp, k.holder = r.TTL, r.Fingerprint, ""
	k.shrunk, k.backoff, k.woken = false, 0, false
	m.filter()
	if m.ev.closing {
		// Not seen: Close shuts the door before the shard learns it is
		// closing. Stopped as Close stops every running owner.
		m.fx.stops = append(m.fx.stops, stopEffect{req: r, cause: errClosing})
	}
	if !r.preGranted {
		// A takeover: granted now, after the stop of the owner it took
		// the key from (stops are performed before answers).
		m.answer(r, Reply{Kind: Grant, Token: r.preToken, Attempt: r.preAttempt, Takeover: r.preTakeover,
			LeaseLeft: max(r.Lease-m.now.Sub(r.preAt()), 0)})
		r.where = owning
	}
	if r.NoRenew {
		m.arm(timerLeaseEnd, k.leaseAt.Add(k.lease))
		return
	}
	m.arm(timerRenew, k.leaseAt.Add(k.lease/3))
}

// leave handles a caller that stopped waiting.
func (m *mover) leave(r *Request) {
	k := m.k
	switch r.where {
	case parked:
		m.dropWaiter(r)
		r.where = gone
		if k.phase == phRemote && len(k.waiters) == 0 {
			m.forget()
		}
	case claiming:
		r.where = gone // its claim's answer goes to the next caller
	case owning:
		// The caller left as it was granted the key and will not run.
		r.where = gone
		if k.owner == r && (k.phase == phRunning || k.phase == phLost) {
			// In phLost the store refuses the Release (lease lost) and the
			// next waiter claims the key: no Finish will come.
			m.release(Reply{})
		}
	}
}

// claim sends a Claim for the candidate.
func (m *mover) claim() {
	k := m.k
	r := k.owner
	k.phase = phClaiming
	k.woken = false
	m.send(opEffect{kind: store.OpClaim, lease: r.Lease, ttl: r.TTL, fp: r.Fingerprint, holder: k.holder})
}

// claimed handles the store's answer to the key's Claim.
func (m *mover) claimed(o *store.Op, sent time.Time) {
	k := m.k
	if k.phase != phClaiming {
		return
	}
	candidate := k.owner
	k.owner = nil
	if o.Err != nil {
		m.warnStore("claim", o.Err)
		m.failAll(candidate, Reply{Kind: FailStore, Op: store.OpClaim, Err: o.Err})
		return
	}
	switch res := &o.Result; res.Status {
	case store.Completed:
		m.foundResult(candidate, res.Record)
	case store.Claimed:
		m.granted(candidate, o, sent)
	case store.InProgress:
		m.foundHolder(candidate, res)
	default:
		m.failAll(candidate, Reply{Kind: FailStore, Op: store.OpClaim,
			Err: fmt.Errorf("store returned an unknown claim status %d", res.Status)})
	}
}

// failAll gives the candidate and every waiter rep, and forgets the key.
func (m *mover) failAll(candidate *Request, rep Reply) {
	m.answer(candidate, rep)
	m.answerWaiters(rep)
	m.forget()
}

// foundResult settles the candidate and every waiter with the key's record.
func (m *mover) foundResult(candidate *Request, rec store.Record) {
	k := m.k
	if !m.now.Before(rec.ExpiresAt) && !k.askedAgain {
		// The record ended while the answer was on its way: callers that
		// came since never saw it live. Ask once more.
		k.askedAgain = true
		if candidate.where == claiming {
			k.owner = candidate
			m.claim()
		} else {
			m.restart()
		}
		return
	}
	c := &Cached{Record: rec}
	if own := m.ev.own; own != nil && own.Record.Token == rec.Token {
		*c = *own // the owner's value and error themselves
		// An own codec's result keeps its encoding in the LRU (see
		// Cached.one): so does this copy.
		k.ownCodec = own.Value != nil && own.Record.Value != nil
	}
	c.Size = c.size()
	m.remember(c)
	rep := Reply{Kind: Settled, Result: c, Joined: k.joined}
	m.answer(candidate, rep)
	m.answerWaiters(rep)
	m.forget()
}

// granted grants the key to the candidate the store gave it to, if it still
// waits; otherwise the claim is released for the next caller.
func (m *mover) granted(candidate *Request, o *store.Op, sent time.Time) {
	k := m.k
	k.token, k.lease, k.leaseAt = o.Result.Token, o.Claim.Lease, sent
	k.fp, k.holder = nil, ""
	k.shrunk = false // a new run: its result may be shrunk once in turn
	if candidate.where != claiming || m.ev.closing {
		// The claim carries the candidate's fingerprint and lease: release
		// it, and the next waiter claims with its own.
		if m.ev.closing {
			m.answerWaiters(Reply{Kind: FailClosed})
		}
		m.release(Reply{})
		return
	}
	k.phase = phRunning
	k.owner = candidate
	k.ttl = candidate.TTL
	k.fp = candidate.Fingerprint
	m.filter()
	m.answer(candidate, Reply{Kind: Grant, Token: k.token, Attempt: uint16(min(o.Result.Attempt, math.MaxUint16)),
		Takeover: o.Result.Takeover, LeaseLeft: k.lease})
	candidate.where = owning
	if candidate.NoRenew {
		// A hard lease: when it ends, the key goes to the next caller.
		m.arm(timerLeaseEnd, k.leaseAt.Add(k.lease))
		return
	}
	m.arm(timerRenew, k.leaseAt.Add(k.lease/3))
}

// foundHolder parks the candidate, first in line, behind the instance that
// holds the key, and arms the re-claim.
func (m *mover) foundHolder(candidate *Request, res *store.ClaimResult) {
	k := m.k
	k.phase = phRemote
	k.joined = true
	k.token, k.fp, k.holder = res.Token, res.Fingerprint, res.Holder
	k.left, k.leaseAt = res.LeaseLeft, m.now
	if candidate.where == claiming {
		candidate.where = parked
		k.waiters = append(k.waiters, nil)
		copy(k.waiters[1:], k.waiters)
		k.waiters[0] = candidate
		m.armSettle(candidate)
		m.fx.waiters++
	}
	m.filter()
	if candidate.where == parked {
		candidate.waited = true // it waits for the other instance
	}
	switch {
	case len(k.waiters) == 0:
		m.forget()
	case k.woken:
		m.restart() // the key settled while the claim was out: ask again
	default:
		m.scheduleReclaim()
	}
}

// scheduleReclaim arms the re-claim of a key held elsewhere: when the
// holder's lease ends, or sooner on a doubling backoff in case its wake-up
// is lost. Without wake-ups the timer is the only way to learn of the
// settle: the first re-claim comes after 10ms (or pollMost, if shorter),
// and the waits double up to pollMost.
func (m *mover) scheduleReclaim() {
	k := m.k
	most := m.cfg.pollMost
	if most <= 0 {
		most = DefaultPollInterval
	}
	first := min(10*time.Millisecond, most)
	if m.cfg.waker {
		first, most = 200*time.Millisecond, 2*time.Second
	}
	k.backoff = min(max(2*k.backoff, first), most)
	m.arm(timerReclaim, m.now.Add(min(k.backoff, k.left+time.Millisecond)))
}

// leaseEnded reports whether the owner runs under a hard lease (no
// renewal) that has ended.
func (m *mover) leaseEnded() bool {
	k := m.k
	return k.phase == phRunning && k.owner != nil && k.owner.NoRenew &&
		!m.now.Before(k.leaseAt.Add(k.lease))
}

// letGo takes the key from an owner whose hard lease ended, when callers
// wait for it: its run is stopped, its result will be refused, and the
// next caller claims the key (a takeover: the store's lease ended too).
func (m *mover) letGo() {
	k := m.k
	if len(k.waiters) == 0 {
		return // nobody to hand it to; a caller that comes later will
	}
	owner := k.owner
	owner.expired = true
	m.fx.stops = append(m.fx.stops, stopEffect{req: owner, cause: store.ErrLeaseLost})
	m.warn("idem: a function outlived its lease (no renewal); the key is taken over", nil)
	m.restart()
}

// restart claims the key again for the next waiter, or forgets the key
// when none is left. What the last holder left goes first.
func (m *mover) restart() {
	k := m.k
	m.disarm()
	k.owner, k.result = nil, Cached{}
	if m.ev.closing {
		m.answerWaiters(Reply{Kind: FailClosed})
	}
	next := m.takeWaiter()
	if next == nil {
		m.forget()
		return
	}
	k.owner = next
	k.fp = nil
	m.claim()
}

// wake handles a store wake-up: a key held elsewhere is claimed again at
// once; while a claim is out, it is asked again if it finds a holder; a
// Complete or Release waiting for its retry is sent at once.
func (m *mover) wake() {
	k := m.k
	switch k.phase {
	case phRemote:
		k.backoff = 0
		m.restart()
	case phClaiming:
		k.woken = true
	case phFinishing, phReleasing:
		if k.retryArmed {
			// The store can be reached (a wake-up came through it, or its
			// connection came back after an outage): offer the result
			// now, not at the end of a backoff of up to a second. After
			// an outage longer than the lease, other instances re-claim
			// the key on the same signal, and may take it over.
			k.backoff = 0
			m.disarm()
			m.resend()
		}
	}
}

// quiet stops renewing the lease of an owner about to store its result
// itself in a transaction that locks the key's record (Set.Quiet): a
// renewal would wait on that lock, and the owner's Finish comes once the
// transaction is over. An owner under a hard lease keeps its lease-end
// timer.
func (m *mover) quiet(r *Request) {
	k := m.k
	if k.owner != r || k.phase != phRunning || r.NoRenew || r.quiet {
		return
	}
	r.quiet = true
	m.disarm()
}

// finish handles the owner's Finish.
func (m *mover) finish(f *Finish) {
	k := m.k
	r := f.Req
	if k.owner != r || (k.phase != phRunning && k.phase != phLost) {
		staleFinish(f, m.fx)
		return
	}
	m.disarm()
	if f.Stored {
		// The owner completed the key itself and has its answer; the
		// store's answer stands, whatever a renewal said meanwhile.
		r.where = nowhere
		k.owner = nil
		k.phase = phFinishing
		k.finishedAt = m.now
		k.result = Cached{Record: f.Record, Value: f.Value, Err: f.Err}
		k.ownCodec = f.OwnCodec
		k.backoff = 0
		if f.StoreErr != nil {
			m.fx.drops = append(m.fx.drops, r)
			m.stored(nil, f.StoreErr)
			return
		}
		if len(k.waiters) == 0 {
			// Nobody to answer: the LRU's copy is all that is kept, and
			// no Cached of its own is needed.
			c := *f.Result
			c.Size = c.size()
			m.remember(&c)
			m.fx.drops = append(m.fx.drops, r) // after the copy: f lives in r
			m.forget()
			return
		}
		c := new(Cached)
		*c = *f.Result
		m.fx.drops = append(m.fx.drops, r) // after the copy: f lives in r
		m.stored(c, nil)
		return
	}
	if k.phase == phLost {
		m.warn("idem: lease lost while the function ran; its result is refused", nil)
		m.answer(r, Reply{Kind: FailLeaseLost, Op: store.OpRenew, Err: store.ErrLeaseLost})
		m.restart()
		return
	}
	switch f.Kind {
	case Success, Permanent:
		k.result = Cached{Record: f.Record, Value: f.Value, Err: f.Err}
		k.ownCodec = f.OwnCodec
		k.phase = phFinishing
		k.finishedAt = m.now
		k.backoff = 0
		m.complete()
	case Panic:
		rep := Reply{Kind: FailOwner, Err: f.Err}
		m.answerWaiters(rep)
		m.release(rep)
	default:
		// A transient failure: the claim is released, then the first
		// waiter claims the key afresh. It is not handed the owner's
		// claim, whose lease, renewal mode and fingerprint are the
		// owner's: every owner's lease is its own.
		m.release(Reply{Kind: FailOwner, Err: f.Err})
	}
}

func (m *mover) complete() {
	k := m.k
	m.send(opEffect{kind: store.OpComplete, token: k.token, record: k.result.Record, ttl: k.ttl})
}

// completed handles the store's answer to the key's Complete.
func (m *mover) completed(o *store.Op) {
	if m.k.phase != phFinishing {
		return
	}
	if o.Err != nil {
		m.stored(nil, o.Err)
		return
	}
	c := &Cached{Record: o.Result.Record, Value: m.k.result.Value, Err: m.k.result.Err}
	m.stored(c, nil)
}

// stored ends a Complete: c is the stored result, or err why there is none.
func (m *mover) stored(c *Cached, err error) {
	k := m.k
	owner := k.owner
	if err != nil && errors.Is(err, store.ErrTooLarge) && m.cfg.oversized != nil && !k.shrunk {
		// The function ran and its effect happened: releasing the key
		// would run it again for the next caller, and retrying would be
		// refused again. Store the small permanent error in its place;
		// the owner (if it still waits) and the waiters get it once it is
		// stored. Once only: a refusal of that record too is final.
		m.warn("idem: the store refused a result for its size; a permanent error is stored in its place", err)
		rec, e := m.cfg.oversized(k.key, k.result.Record, err)
		k.shrunk = true
		k.result = Cached{Record: rec, Err: e}
		k.ownCodec = false
		k.backoff = 0
		m.complete()
		return
	}
	if err == nil {
		c.Size = c.size()
		m.remember(c)
		if owner != nil {
			m.answer(owner, Reply{Kind: Settled, Result: c})
		}
		m.answerWaiters(Reply{Kind: Settled, Result: c, Joined: true})
		m.forget()
		return
	}
	if owner != nil {
		// The owner learns at once that its result is not stored yet; a
		// retry of its call waits for the retries below, as any caller.
		code := FailStore
		if errors.Is(err, store.ErrLeaseLost) {
			code = FailLeaseLost
		}
		m.answer(owner, Reply{Kind: code, Op: store.OpComplete, Err: err})
		k.owner = nil
	}
	switch {
	case errors.Is(err, store.ErrLeaseLost), m.ev.closing:
		m.restart()
	case !store.Retryable(err):
		// The store refuses the record itself: final for everyone waiting
		// for it. The claim is released so that a later call may run.
		m.warnStore("complete", err)
		m.answerWaiters(Reply{Kind: FailStore, Op: store.OpComplete, Err: err})
		m.release(Reply{})
	case !m.now.Before(k.finishedAt.Add(k.ttl)):
		m.warn("idem: storing a result failed until its TTL ended; giving it up", err)
		m.answerWaiters(Reply{Kind: FailStore, Op: store.OpComplete, Err: err})
		m.release(Reply{})
	default:
		// The store may have failed before or after it wrote the record; a
		// Complete with the same token is safe to repeat. Keep the result
		// and offer it again until the store answers.
		m.warnStore("complete", err)
		m.retryLater()
	}
}

// release sends a Release for the key's token; ownerReply goes to the owner
// (if any) once the store has answered.
func (m *mover) release(ownerReply Reply) {
	k := m.k
	k.phase = phReleasing
	k.ownerReply = ownerReply
	k.backoff = 0
	m.disarm()
	m.send(opEffect{kind: store.OpRelease, token: k.token})
}

// released handles the store's answer to the key's Release.
func (m *mover) released(o *store.Op) {
	k := m.k
	if k.phase != phReleasing {
		return
	}
	if k.owner != nil && k.ownerReply.Kind != 0 {
		m.answer(k.owner, k.ownerReply)
	}
	k.owner = nil
	if o.Err != nil && store.Retryable(o.Err) {
		if !m.ev.closing && m.now.Before(k.leaseAt.Add(k.lease)) {
			// Until the store releases the key, the next claim would wait for
			// this shard's own claim to end; a Release with the same token is
			// safe to repeat. The waiters keep waiting.
			m.warnStore("release", o.Err)
			m.retryLater()
			return
		}
		m.warn("idem: releasing a key failed; it stays claimed until its lease ends", o.Err)
	}
	m.restart()
}

// retryLater repeats the key's Complete or Release after a doubling
// backoff.
func (m *mover) retryLater() {
	k := m.k
	k.retryArmed = true
	k.backoff = min(max(2*k.backoff, 10*time.Millisecond), time.Second)
	m.arm(timerRetry, m.now.Add(k.backoff))
}

// renewed handles the store's answer to a Renew sent at sent.
func (m *mover) renewed(o *store.Op, sent time.Time) {
	k := m.k
	if k.phase != phRunning || o.Token != k.token || k.owner.NoRenew || k.owner.quiet {
		return // an answer for an earlier owner, for a run already over, or one storing its result
	}
	switch {
	case o.Err == nil:
		k.leaseAt = sent
		m.arm(timerRenew, sent.Add(k.lease/3))
	case errors.Is(o.Err, store.ErrLeaseLost):
		// The owner may have completed the key itself meanwhile (then its
		// Finish says so); otherwise its run is over for the store.
		k.phase = phLost
		m.fx.stops = append(m.fx.stops, stopEffect{req: k.owner, cause: store.ErrLeaseLost})
	default:
		m.warnStore("renew", o.Err)
		end := k.leaseAt.Add(k.lease)
		if !m.now.Before(end) {
			// The lease may have run out and the key be taken over: tell fn
			// to stop. Its result is still offered; the store refuses it if
			// the key was taken.
			m.fx.stops = append(m.fx.stops, stopEffect{req: k.owner, cause: store.ErrLeaseLost})
			m.arm(timerRenew, m.now.Add(k.lease/3))
			return
		}
		// Try again a third of a lease later, or at the lease's end if
		// that comes first: fn is told to stop then if the store still
		// fails (see timerLeaseEnd).
		m.arm(timerRenew, minTime(m.now.Add(k.lease/3), end))
	}
}

func minTime(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// timerDue handles the key's phase timer.
func (m *mover) timerDue(kind timerKind) {
	k := m.k
	switch kind {
	case timerRenew:
		if k.phase == phRunning && !k.owner.quiet {
			m.send(opEffect{kind: store.OpRenew, token: k.token, lease: k.lease})
			// Until the renewal's answer comes, the phase timer watches
			// the end of the lease: a store that does not answer (a
			// paused server, a partition) must not keep fn running past
			// it unaware.
			m.arm(timerLeaseEnd, k.leaseAt.Add(k.lease))
		}
	case timerReclaim:
		if k.phase == phRemote {
			m.restart()
		}
	case timerLeaseEnd:
		switch {
		case m.leaseEnded():
			m.letGo()
		case k.phase == phRunning && !k.owner.NoRenew && !k.owner.quiet && !m.now.Before(k.leaseAt.Add(k.lease)):
			// A renewal is out, unanswered, and the lease may have ended:
			// tell fn to stop. The key stays its owner's: a result fn
			// returns is still offered, and the store refuses it if the
			// key was taken over. The renewal's answer arms the next one.
			// (An owner storing its result itself is left alone: its
			// transaction decides.)
			m.fx.stops = append(m.fx.stops, stopEffect{req: k.owner, cause: store.ErrLeaseLost})
		}
	case timerRetry:
		m.resend()
	}
}

// resend sends the key's Complete or Release again, now.
func (m *mover) resend() {
	k := m.k
	k.retryArmed = false
	switch k.phase {
	case phFinishing:
		m.complete()
	case phReleasing:
		m.send(opEffect{kind: store.OpRelease, token: k.token})
	}
}

// close starts the shutdown of the key: waiters get FailClosed, a running
// owner is told to stop, and its result is still stored or released.
func (m *mover) close() {
	k := m.k
	m.answerWaiters(Reply{Kind: FailClosed})
	switch k.phase {
	case phClaiming:
		m.answer(k.owner, Reply{Kind: FailClosed})
		k.owner.where = gone
	case phRunning, phLost:
		m.fx.stops = append(m.fx.stops, stopEffect{req: k.owner, cause: errClosing})
	case phRemote:
		m.forget()
	}
}

// stop answers everyone at once: the shard is stopping.
func (m *mover) stop() {
	k := m.k
	closed := Reply{Kind: FailClosed}
	m.answerWaiters(closed)
	if k.owner != nil {
		m.fx.stops = append(m.fx.stops, stopEffect{req: k.owner, cause: errClosing})
		m.answer(k.owner, closed)
	}
	m.forget()
}

// remember keeps the key's terminal record in the LRU once it is
// validated: not expired, and a stored error carries no value. A key
// created while a Clear deletes it keeps nothing.
func (m *mover) remember(c *Cached) {
	rec := &c.Record
	if m.k.noCache || !rec.ExpiresAt.After(m.now) || (rec.Failed && len(rec.Value) > 0) {
		return
	}
	// The copy lives in the key's state (its result is not needed any
	// more: the key is settled) until the shard has cached it.
	m.k.result = c.one(m.k.ownCodec)
	m.fx.cache = &m.k.result
}

// conflict is the answer to a caller that may not wait any longer.
func (m *mover) conflict() Reply {
	return Reply{Kind: FailConflict, LeaseLeft: m.leaseLeft()}
}

func (m *mover) leaseLeft() time.Duration {
	k := m.k
	var left time.Duration
	switch k.phase {
	case phRunning, phLost, phFinishing, phReleasing:
		left = k.lease - m.now.Sub(k.leaseAt)
	case phRemote:
		left = k.left - m.now.Sub(k.leaseAt)
	}
	return max(left, 0)
}

// park queues r on the key and starts its settle time.
func (m *mover) park(r *Request) {
	r.where = parked
	r.waited = true
	m.k.waiters = append(m.k.waiters, r)
	m.armSettle(r)
	m.fx.waiters++
}

// armSettle starts r's settle time, once, and makes sure the key's settle
// timer fires no later than r's deadline.
func (m *mover) armSettle(r *Request) {
	if !r.deadline.IsZero() || r.Settle <= 0 || r.Settle == forever {
		return
	}
	r.deadline = m.now.Add(r.Settle)
	if k := m.k; k.settleAt.IsZero() || r.deadline.Before(k.settleAt) {
		k.settleAt = r.deadline
		m.fx.timers = append(m.fx.timers, timerEffect{settle: true, kind: timerSettle, at: r.deadline})
	}
}

// settleDue answers the callers whose settle time has ended, then arms the
// settle timer for the earliest deadline left.
func (m *mover) settleDue() {
	k := m.k
	k.settleAt = time.Time{}
	var next time.Time
	kept := k.waiters[:0]
	for _, w := range k.waiters {
		if !w.deadline.IsZero() && !m.now.Before(w.deadline) {
			m.answer(w, m.conflict())
			m.fx.waiters--
			continue
		}
		kept = append(kept, w)
		if !w.deadline.IsZero() && (next.IsZero() || w.deadline.Before(next)) {
			next = w.deadline
		}
	}
	clear(k.waiters[len(kept):])
	k.waiters = kept
	if c := k.owner; c != nil && c.where == claiming && !c.deadline.IsZero() {
		if !m.now.Before(c.deadline) {
			m.answer(c, m.conflict())
			c.where = gone
		} else if next.IsZero() || c.deadline.Before(next) {
			next = c.deadline
		}
	}
	if !next.IsZero() {
		k.settleAt = next
		m.fx.timers = append(m.fx.timers, timerEffect{settle: true, kind: timerSettle, at: next})
	}
	if k.phase == phRemote && len(k.waiters) == 0 {
		m.forget()
	}
}

// takeWaiter removes and returns the first waiter as the next candidate;
// its settle time keeps running until it is granted the key.
func (m *mover) takeWaiter() *Request {
	k := m.k
	if len(k.waiters) == 0 {
		return nil
	}
	r := k.waiters[0]
	k.waiters[0] = nil
	k.waiters = k.waiters[1:]
	m.fx.waiters--
	r.where = claiming
	return r
}

// dropWaiter removes r from the waiters.
func (m *mover) dropWaiter(r *Request) {
	k := m.k
	for i, w := range k.waiters {
		if w == r {
			copy(k.waiters[i:], k.waiters[i+1:])
			k.waiters[len(k.waiters)-1] = nil
			k.waiters = k.waiters[:len(k.waiters)-1]
			m.fx.waiters--
			break
		}
	}
	r.where = nowhere
}

// answerWaiters gives every waiter the same answer.
// The waiters go to the shard as one broadcast, in their own slice: a
// storm's thousand answers are sent without first being copied into a
// thousand effects, so the first waiter is answered as soon as the shard
// starts.
func (m *mover) answerWaiters(rep Reply) {
	k := m.k
	if len(k.waiters) == 0 {
		return
	}
	for _, w := range k.waiters {
		w.where = nowhere // every waiter is parked, and was marked waited
	}
	rep.Waited = true
	m.fx.broadcasts = append(m.fx.broadcasts, broadcast{reqs: k.waiters, rep: rep})
	m.fx.waiters -= len(k.waiters)
	k.waiters = nil
}

// filter answers, and removes, the waiters that cannot wait for the
// holder: a different fingerprint, or no settle time.
func (m *mover) filter() {
	k := m.k
	kept := k.waiters[:0]
	for _, w := range k.waiters {
		switch {
		case mismatch(k.fp, w.Fingerprint):
			m.answer(w, Reply{Kind: FailMismatch})
		case w.Settle == 0:
			m.answer(w, m.conflict())
		default:
			kept = append(kept, w)
			continue
		}
		m.fx.waiters--
	}
	clear(k.waiters[len(kept):])
	k.waiters = kept
}

// errClosing is the cause given to an owner's context when the runtime
// closes while its function runs.
var errClosing = fmt.Errorf("%w: runtime closing", store.ErrClosed)
