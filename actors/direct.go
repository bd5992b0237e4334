package actors

// Owners that claim their key themselves. With a store that lives in
// process and whose owners complete their own keys (memstore), a call that
// finds its key free needs nothing from the shard: the store's Claim
// decides who owns the key, the owner stores its own result and keeps it in
// the LRU. So Send claims the key on the caller's goroutine and, when the
// store grants it, hands the caller its Grant at once; when the run ends
// well, Finish caches its result and nothing reaches the shard. An
// executed call then costs no goroutine hand-off at all, where a round
// trip through the shard cost three (measured: unique keys in memory went
// from about 165k to 250k calls a second on the development box).
//
// The shard stays the one place that orders a key's callers. It learns of
// such an owner (the owner is "announced": its request is sent to the
// shard, which adopts it as the key's owner, see keyState.adopt) whenever
// it is needed:
//   - a run that ends any other way (a transient error, a panic, a store
//     that refused the result) is announced, then its Finish goes to the
//     shard as any owner's: release, hand-off and answers are the engine's;
//   - a run still going after promoteAfter is announced by the shard's
//     promotion timer, so that its lease is renewed (and a hard lease ends)
//     as every owner's;
//   - Close announces every direct owner before the shard learns it is
//     closing, so Close stops and waits for them as for the others;
//   - a caller that leaves as it is granted the key is announced before it
//     leaves, so that the shard releases the key;
//   - a claim that took the key over is announced, after any listed owner
//     of the key, and granted by the shard once it has stopped the owner
//     it took the key from;
//   - another caller of the key that reaches the shard has the owner
//     adopted at once (takeDirect), and is parked behind it; if the
//     shard's own claim finds the key held, or just completed, by a listed
//     owner, that owner is announced (heldByDirect).
//
// An owner stays listed until its run is over (onFinish), however the
// shard heard of it: Clear and Forget see its key busy, and its busy slot
// sends the key's later callers straight to the shard. Calls whose lease is
// shorter than minDirectLease take the shard's path: their renewal could
// not wait for the promotion timer.

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/internal/handoff"
	"github.com/idemrt/idem/keyshard"
	"github.com/idemrt/idem/store"
)

const (
	// promoteAfter is how long a direct owner runs before the shard's
	// promotion timer announces it (at most twice that).
	promoteAfter = 100 * time.Millisecond
	// minDirectLease is the shortest lease a direct owner may have: its
	// first renewal is due at a third of it, well after the promotion.
	minDirectLease = time.Second
)

// The states of a direct owner's request (Request.dstate); 0: not one.
const (
	dClaiming  int32 = iota + 1 // registered; its Claim is under way
	dRunning                    // granted by the store; the shard knows nothing of it
	dAnnounced                  // sent to the shard, which owns it from then on
	dDone                       // its result is stored and cached; the shard never saw it
	dRefused                    // Close came before its Claim ended: it gives the key back
)

// direct is what a shard keeps of its direct owners: a list, so that the
// promotion timer and Close find them, and the counters that keep an
// owner's LRU insert from bringing back a result the store deleted.
type direct struct {
	mu    sync.Mutex
	head  *Request
	timer clock.Timer // the promotion timer, armed while the list is not empty
	// The LRU drops a result the store deletes (Forget, Clear, a store
	// invalidation) on the shard's goroutine, between a count of drops
	// begun and one of drops ended: per busy slot for the drops of one key
	// (keyDrops), for all slots for those of a prefix or of everything
	// (allDrops). A direct owner keeps its insert only if no drop of its
	// slot or of all was under way at its claim or began since.
	keyDrops [busySlots]drops
	allDrops drops
	// busy counts the listed owners by a hash of their key: a caller whose
	// slot is taken goes to the shard (most likely a duplicate of a key in
	// flight, which the shard would park anyway) instead of trying the
	// store first, so that a storm's duplicates do not all contend for the
	// store and the list.
	busy [busySlots]atomic.Int32
}

const busySlots = 1024

// drops counts the LRU drops of a slot (or of all) begun and ended.
type drops struct{ begun, ended atomic.Uint32 }

func (c *drops) begin() { c.begun.Add(1) }
func (c *drops) end()   { c.ended.Add(1) }

// load returns the drops begun, then those ended.
func (c *drops) load() (begun, ended uint32) { return c.begun.Load(), c.ended.Load() }

// keyDrop and allDrop bracket a drop of the LRU on the shard's goroutine
// (see direct.keyDrops): call the function they return once it is over.
func (s *shard) keyDrop(key string) func() {
	c := &s.dir.keyDrops[busySlot(key)]
	c.begin()
	return c.end
}

func (s *shard) allDrop() func() {
	s.dir.allDrops.begin()
	return s.dir.allDrops.end
}

// busySlot is the slot of key in direct.busy.
func busySlot(key string) uint16 { return uint16(keyshard.Hash(key) >> 40 & (busySlots - 1)) }

// claimHere claims r's key in the store on the caller's goroutine (see
// above) and reports true when the store granted it: r's Grant is then in
// r.Reply, and r is a direct owner. On every other answer (the key in
// progress or settled, a failure, a closing runtime) it reports false and
// Send sends r as usual; the shard claims again and answers.
func (set *Set) claimHere(s *shard, r *Request) bool {
	// Registered inside the door: once Close has shut it, every direct
	// owner is in the list, where Close finds it.
	r.dslot = busySlot(r.Key)
	if s.dir.busy[r.dslot].Load() != 0 {
		return false
	}
	s.sending.Add(1)
	if s.shut.Load() {
		s.sending.Add(-1)
		return false // Send's own try answers store.ErrClosed
	}
	r.dstate.Store(dClaiming)
	kb, ke := s.dir.keyDrops[r.dslot].load()
	ab, ae := s.dir.allDrops.load()
	r.dropsAt, r.dropsBusy = [2]uint32{kb, ab}, kb != ke || ab != ae
	s.link(r)
	s.sending.Add(-1)

	at := s.cfg.Clock.Now()
	s.nOps.Add(1)
	s.nBatches.Add(1)
	res, err := s.cfg.Store.Claim(context.Background(), r.Key, store.ClaimRequest{
		Owner:       set.callerOwner(),
		Lease:       r.Lease,
		TTL:         r.TTL,
		Fingerprint: r.Fingerprint,
		Waiter:      s.cfg.wakerID,
	})
	if err != nil || res.Status != store.Claimed {
		// Only r in its busy slot: no direct owner of the key is between
		// storing its result and caching it, so a result found is the
		// answer, with no shard hop (otherwise the shard waits for that
		// owner's Finish, heldByDirect).
		alone := s.dir.busy[r.dslot].Load() == 1
		s.unlink(r)
		if r.dstate.Swap(0) != dClaiming {
			return false // Close refused it (and counted it off)
		}
		s.pending.Add(-1)
		if err != nil || res.Status != store.Completed || !alone {
			return false
		}
		c := &r.Finish.Own // the request's room, as for an LRU hit in the shard
		if hit, ok := s.hit(r.Key, s.now()); ok && hit.Record.Token == res.Record.Token {
			// Its owner cached it since the caller looked: the owner's
			// value itself, not a decoded copy.
			*c = hit
		} else if s.cache == nil {
			*c = Cached{Record: res.Record}
		} else {
			// Its owner may be a direct owner the shard adopted, whose
			// Finish (with its value) the shard has not handled yet: the
			// shard answers, as it would have before.
			return false
		}
		r.Reply <- Reply{Kind: Settled, Result: c}
		r.unref() // the shard's hold: it never had r
		return true
	}
	r.pre, r.preToken, r.deadline = true, res.Token, at // (preAt)
	r.preAttempt, r.preTakeover = uint16(min(res.Attempt, math.MaxUint16)), res.Takeover
	if res.Takeover {
		// The key's last owner may be one of this shard's, whose lease the
		// store let end: the shard stops it before it grants r the key
		// (see adopt), as it would before granting a waiter the key.
		if s.announceKey(r) {
			return true
		}
	} else {
		// In Reply before anyone may send r to the shard: the shard may
		// answer r next (its run stopped by a forced Close, say), and
		// Reply holds one answer.
		r.preGranted = true
		r.Reply <- Reply{Kind: Grant, Token: res.Token, Attempt: r.preAttempt, LeaseLeft: r.Lease}
		if r.dstate.CompareAndSwap(dClaiming, dRunning) {
			return true
		}
		<-r.Reply
	}
	// Close came first (it unlinked r): give the key back.
	r.pre, r.preGranted, r.preToken, r.deadline = false, false, store.Token{}, time.Time{}
	r.dstate.Store(0)
	_ = s.cfg.Store.Release(context.Background(), r.Key, res.Token)
	return false
}

// callerOwner returns the owner of a claim made on a caller's goroutine:
// unique, like the shards' owners, and from the same sequence.
func (set *Set) callerOwner() string {
	if set.cfg.newOwner != nil {
		return set.cfg.newOwner() // shared by the shards: safe for concurrent use
	}
	ids, _ := set.callerIDs.Get().(*ownerIDs)
	if ids == nil {
		ids = &ownerIDs{instance: set.instance, seq: &set.ownerSeq}
	}
	id := ids.get()
	set.callerIDs.Put(ids)
	return id
}

// finishHere ends the run of a direct owner whose result the store holds
// (f.Stored without an error): it keeps the result in the LRU and gives up
// the shard's hold on the request, and reports true. For any other end, or
// an owner already announced, it makes sure the shard knows the owner and
// reports false: the Finish goes to the shard.
func (set *Set) finishHere(f *Finish) bool {
	r := f.Req
	s := r.shard
	if f.Stored && f.StoreErr == nil && r.dstate.Load() == dRunning {
		// Cached while still dRunning: a caller that reaches the shard
		// from now on either finds the result in the LRU, or has its
		// claim find this owner listed and waits for its Finish
		// (heldByDirect), never the store's copy alone.
		s.cacheDirect(r, f)
		if r.dstate.CompareAndSwap(dRunning, dDone) {
			s.unlink(r)
			s.pending.Add(-1)
			r.unref() // the shard's hold: it never had r
			return true
		}
	}
	s.announce(r)
	return false
}

// cacheDirect keeps a direct owner's stored result in the LRU, as the
// shard keeps an owner's, unless a drop of the LRU (Forget, Clear, a store
// invalidation) was under way at its claim or began since: the store may
// have deleted the result already, and the drop may have passed.
func (s *shard) cacheDirect(r *Request, f *Finish) {
	if f.Result == nil {
		return
	}
	c := *f.Result
	c.Size = c.size()
	s.cacheGuarded(r, c, f.OwnCodec)
}

// cacheGuarded keeps c, a result of r's key, in the LRU, as the shard
// keeps a settled result (see mover.remember), unless a drop of the LRU was
// under way at r's claim or began since (see cacheDirect).
func (s *shard) cacheGuarded(r *Request, c Cached, ownCodec bool) {
	if s.cache == nil {
		return
	}
	rec := &c.Record
	if !rec.ExpiresAt.After(s.now()) || (rec.Failed && len(rec.Value) > 0) {
		return
	}
	if s.droppedSince(r) {
		return
	}
	s.cacheAdd(r.Key, c.one(ownCodec))
	if s.droppedSince(r) {
		s.cache.Remove(r.Key)
	}
}

// announce sends a direct owner still unknown to the shard to it, as the
// key's owner (see keyState.adopt). It does nothing for any other request.
//
// Every announcement is sent under the list's lock, so that taking the lock
// is a barrier: once announce returns, r's request is in the shard's
// mailbox, whoever announced it, and a message about r sent next comes
// after it.
func (s *shard) announce(r *Request) {
	if r.dstate.Load() == 0 {
		return
	}
	d := &s.dir
	d.mu.Lock()
	if r.dstate.CompareAndSwap(dRunning, dAnnounced) {
		handoff.Note(handoff.Request)
		s.send((*requestMsg)(r))
	}
	d.mu.Unlock()
}

// announceKey announces every other direct owner of r's key first, then
// r, whose claim under way took the key over and is not granted yet: the
// shard stops the owner r took the key from, then grants r
// (keyState.adopt). It reports false when Close came first.
func (s *shard) announceKey(r *Request) bool {
	d := &s.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	for o := d.head; o != nil; {
		next := o.dnext
		if o != r && o.Key == r.Key && o.dstate.CompareAndSwap(dRunning, dAnnounced) {
			handoff.Note(handoff.Request)
			s.send((*requestMsg)(o))
		}
		o = next
	}
	if !r.dstate.CompareAndSwap(dClaiming, dAnnounced) {
		return false
	}
	handoff.Note(handoff.Request)
	s.send((*requestMsg)(r))
	return true
}

// announceOwnersOf announces the direct owners of key whose runs are
// going: the shard's own claim of the key just took it over, so their
// claims are older, and the shard stops them when they come (adopt).
func (s *shard) announceOwnersOf(key string) {
	d := &s.dir
	if d.busy[busySlot(key)].Load() == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for r := d.head; r != nil; r = r.dnext {
		if r.Key == key && r.dstate.CompareAndSwap(dRunning, dAnnounced) {
			handoff.Note(handoff.Request)
			s.send((*requestMsg)(r))
		}
	}
}

// droppedSince reports whether a drop of the LRU of r's slot, or of every
// key, was under way at r's claim or began since (see direct.keyDrops).
func (s *shard) droppedSince(r *Request) bool {
	kb, ke := s.dir.keyDrops[r.dslot].load()
	ab, ae := s.dir.allDrops.load()
	return r.dropsBusy || kb != r.dropsAt[0] || ke != kb || ab != r.dropsAt[1] || ae != ab
}

// takeDirect takes off the list the direct owner of key whose run is
// going, if there is one, for the shard to adopt at once: another caller
// of the key has come to the shard, and is parked behind it.
func (s *shard) takeDirect(key string) *Request {
	d := &s.dir
	if d.busy[busySlot(key)].Load() == 0 {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for r := d.head; r != nil; r = r.dnext {
		if r.Key == key && r.dstate.CompareAndSwap(dRunning, dAnnounced) {
			return r
		}
	}
	return nil
}

// heldByDirect turns the answer of a shard's Claim of o's key into "held
// by" the direct owner that claimed the key here, if one did and its run
// is not over, and announces that owner (see announce): the shard then
// parks the key's callers behind it as behind another instance's holder,
// adopts the owner when its request comes, and answers the callers with
// its result when its Finish comes, as the owner's callers are answered
// in process (its value itself, its error itself). The claim may have
// found the key completed already: the owner stored its result but has
// not cached it yet.
func (s *shard) heldByDirect(o *store.Op) {
	d := &s.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	for r := d.head; r != nil; r = r.dnext {
		if r.Key != o.Key || !r.dstate.CompareAndSwap(dRunning, dAnnounced) {
			continue
		}
		handoff.Note(handoff.Request)
		s.send((*requestMsg)(r))
		o.Result = store.ClaimResult{Status: store.InProgress, Token: r.preToken, Fingerprint: r.Fingerprint,
			Holder: r.preToken.Owner, LeaseLeft: max(r.Lease-s.now().Sub(r.preAt()), 0)}
		return
	}
}

// link adds r to the shard's direct owners and arms the promotion timer if
// it is not armed.
func (s *shard) link(r *Request) {
	d := &s.dir
	d.mu.Lock()
	r.dnext = d.head
	if d.head != nil {
		d.head.dprev = r
	}
	d.head = r
	d.busy[r.dslot].Add(1)
	s.pending.Add(1)
	if d.timer == nil {
		d.timer = s.cfg.Clock.AfterFunc(promoteAfter, s.promoteDue)
	}
	d.mu.Unlock()
}

// unlink removes r from the shard's direct owners, if it is there.
func (s *shard) unlink(r *Request) {
	d := &s.dir
	d.mu.Lock()
	d.remove(r)
	d.mu.Unlock()
}

func (d *direct) remove(r *Request) {
	if r.dprev == nil && d.head != r {
		return // not in the list
	}
	if r.dprev != nil {
		r.dprev.dnext = r.dnext
	} else {
		d.head = r.dnext
	}
	if r.dnext != nil {
		r.dnext.dprev = r.dprev
	}
	r.dprev, r.dnext = nil, nil
	d.busy[r.dslot].Add(-1)
}

// promoteDue is the promotion timer: it announces the direct owners that
// have run for promoteAfter, and stays armed while any is left.
func (s *shard) promoteDue() {
	now := s.cfg.Clock.Now()
	d := &s.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	d.timer = nil
	left := false // an owner the timer may still have to announce
	for r := d.head; r != nil; r = r.dnext {
		if r.dstate.Load() == dRunning && now.Sub(r.preAt()) >= promoteAfter && r.dstate.CompareAndSwap(dRunning, dAnnounced) {
			s.send((*requestMsg)(r))
		}
		if st := r.dstate.Load(); st == dRunning || st == dClaiming {
			left = true
		}
	}
	if left && !s.shut.Load() {
		d.timer = s.cfg.Clock.AfterFunc(promoteAfter, s.promoteDue)
	}
}

// promoteAll announces every direct owner of the shard, and turns away
// those whose Claim is under way: Close calls it once the door is shut,
// before the shard learns that it is closing.
func (s *shard) promoteAll() {
	d := &s.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.timer != nil {
		d.timer.Stop()
		d.timer = nil
	}
	for r := d.head; r != nil; {
		next := r.dnext
		// Its caller may move it from dClaiming to dRunning meanwhile:
		// try both until one holds or it is neither any more.
		for {
			if r.dstate.CompareAndSwap(dRunning, dAnnounced) {
				s.send((*requestMsg)(r))
				break
			}
			if r.dstate.CompareAndSwap(dClaiming, dRefused) {
				d.remove(r)
				s.pending.Add(-1) // its caller gives the key back
				break
			}
			if st := r.dstate.Load(); st != dClaiming && st != dRunning {
				break
			}
		}
		r = next
	}
}

// hasDirect reports whether a direct owner of key is listed (its claim
// under way, or its run).
func (s *shard) hasDirect(key string) bool {
	d := &s.dir
	if d.busy[busySlot(key)].Load() == 0 {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for r := d.head; r != nil; r = r.dnext {
		if r.Key == key {
			return true
		}
	}
	return false
}

// directInFlight returns what the shard's direct owners say of key: its
// fingerprint and the lease it has left at now, if one of them holds it.
func (s *shard) directInFlight(key string, now time.Time) (inFlight, bool) {
	d := &s.dir
	d.mu.Lock()
	defer d.mu.Unlock()
	for r := d.head; r != nil; r = r.dnext {
		if r.Key == key && r.dstate.Load() == dRunning {
			return inFlight{fingerprint: r.Fingerprint, leaseLeft: max(r.Lease-now.Sub(r.preAt()), 0)}, true
		}
	}
	return inFlight{}, false
}
