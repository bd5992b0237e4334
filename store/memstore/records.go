package memstore

import (
	"math"
	"sync"
	"time"

	"github.com/idemrt/idem/store"
)

// shard holds the records of the keys that hash to it, behind one mutex,
// with the queues that expire them.
type shard struct {
	mu      sync.Mutex
	records map[string]*record
	expiry  expiryQueues
	// abandoned lists claims in progress past lease + TTL, oldest first:
	// the first records evicted when space is needed (see evictOne).
	abandoned []expiryItem
	// stale counts the queue items whose record was dropped before they
	// fell due (a release, a Forget): compact removes them once they
	// outnumber the records.
	stale int
}

// drop removes key's record r before its time (a release, a Forget): its
// memory goes at once, but for the small queue item that still names it,
// which compact removes once such items outnumber the live records. So a
// flood of keys released or forgotten (a handler that answers 4xx, a
// function that fails) holds no more than the records the store counts.
func (sh *shard) drop(key string, r *record) {
	sh.remove(key, r)
	sh.stale++
	if sh.stale > max(minCompact, len(sh.records)) {
		sh.compact()
	}
}

// remove deletes key's record r and lets go of what it references: another
// queue item may still name r (a record whose removal moved earlier by more
// than a lease has two, see setRemoveAt), and would otherwise keep its
// result alive until that item falls due, as late as the claim's TTL.
func (sh *shard) remove(key string, r *record) {
	delete(sh.records, key)
	r.fp, r.value, r.errText, r.waiters = nil, nil, "", nil
}

// minCompact is the fewest stale queue items worth a compaction.
const minCompact = 256

// compact removes from the queues and the abandoned list the items whose
// record is gone or replaced.
func (sh *shard) compact() {
	for _, q := range sh.expiry {
		q.filter(func(it expiryItem) bool { return sh.records[it.key] == it.rec })
	}
	kept := sh.abandoned[:0]
	for _, a := range sh.abandoned {
		if sh.records[a.key] == a.rec {
			kept = append(kept, a)
		} else {
			a.rec.listed = false
		}
	}
	clear(sh.abandoned[len(kept):])
	sh.abandoned = kept
	sh.stale = 0
}

// held counts the queue items and records the shard holds: what
// MaxRecords bounds.
func (sh *shard) held() (records, items int) {
	for _, q := range sh.expiry {
		items += q.len()
	}
	return len(sh.records), items + len(sh.abandoned)
}

// The states of a record.
const (
	inProgress uint8 = iota + 1
	completed
)

// record is one key's state: a claim in progress (token, lease, fp,
// waiters) or, once completed, its result. removeAt is when it goes:
// lease + TTL after a claim (a renewal only moves it later), TTL after
// completion, zero once a claim in progress has outlived it (see sweep).
//
// A completed record keeps only what its store.Record does not share with
// the claim (see result): the token, fingerprint and expiry stay where the
// claim had them. Its times are ticks (8 bytes, not a time.Time's 24), and
// the rare waiters list is behind a pointer. The store holds one record
// per key for its whole TTL, so this keeps each in 144 bytes rather than
// 320 (less to allocate, clear and for the collector to scan).
type record struct {
	state   uint8
	listed  bool   // in its shard's abandoned list
	failed  bool   // completed: the result is a permanent error
	attempt uint32 // claims since the record was created
	token   store.Token
	// fp is the claim's fingerprint, then the result's.
	fp         []byte
	leaseUntil tick
	lease      time.Duration
	ttl        time.Duration
	removeAt   tick
	waiters    *[]string // the waker ids of instances waiting for the key (store.ClaimRequest.Waiter)
	// Completed: the result's value or error text, and when it was stored.
	value     []byte
	errText   string
	createdAt tick
}

// tick is a time as the store keeps it: the nanoseconds since the store's
// epoch, a reading of its clock 50 years before the store was made, so that
// every time it deals with is positive and 0 can mean none. Taken with
// time.Time.Sub, a tick follows the clock's monotonic reading as a
// time.Time would: a step of the wall clock moves no lease and no expiry.
//
// An int64 of nanoseconds holds 292 years, and Sub saturates there: a
// clock read more than 242 years after the store was made (a fake one moved
// that far) stops at the last tick. Leases and TTLs are at most 100 years
// each (store.MaxDuration), so a lease + TTL added to a clock read more than
// 42 years after the store was made can pass that last tick: times are
// added with after, which stops there (a removal due 292 years after the
// epoch rather than later), and never compared as sums that could wrap.
type tick int64

// epochBefore is how long before the store was made its epoch is.
const epochBefore = 50 * 365 * 24 * time.Hour

// lastTick is the latest time a tick holds.
const lastTick = tick(math.MaxInt64)

// ticks converts a duration to ticks.
func ticks(d time.Duration) tick { return tick(d) }

// after returns the tick d (at least 0) after t, or lastTick if that is
// later.
func (t tick) after(d time.Duration) tick {
	if t > lastTick-ticks(d) {
		return lastTick
	}
	return t + ticks(d)
}

// tickOf returns t as a tick of s.
func (s *Store) tickOf(t time.Time) tick { return tick(t.Sub(s.epoch)) }

// result returns the stored result of a completed record, its times read
// at wall, tick now. Its ExpiresAt is removeAt: Complete sets both to the
// same time, and nothing moves the removal of a completed record after that.
//
// The times are wall less the ticks since: those of the clock when the
// record was stored for a fake clock (time.Time.Equal), and for the real
// one on today's wall clock, with the monotonic reading they were taken
// with. The store's epoch plus the ticks would be off by every step of the
// wall clock since the store was made (an NTP correction after boot), which
// ticks, following the monotonic reading, do not see.
func (r *record) result(wall time.Time, now tick) store.Record {
	return store.Record{
		Value:       r.value,
		Failed:      r.failed,
		Error:       r.errText,
		Fingerprint: r.fp,
		CreatedAt:   wall.Add(time.Duration(r.createdAt - now)),
		ExpiresAt:   wall.Add(time.Duration(r.removeAt - now)),
		Token:       r.token,
	}
}

// waiting returns the waker ids of the instances waiting for r's key.
func (r *record) waiting() []string {
	if r.waiters == nil {
		return nil
	}
	return *r.waiters
}

// live returns the key's record unless it has expired, removing due records.
// A record in progress never expires by time: its lease ending matters only
// once another claim takes the key over, so a slow owner that nobody
// replaced can still complete it.
func (sh *shard) live(key string, now tick) *record {
	sh.sweep(now, 4)
	r := sh.records[key]
	if r != nil && r.state == completed && now >= r.removeAt {
		sh.remove(key, r)
		return nil
	}
	return r
}

// sweep removes at most n records per queue whose removal time has passed.
func (sh *shard) sweep(now tick, n int) {
	for _, q := range sh.expiry {
		for i := 0; i < n; i++ {
			it, ok := q.popDue(now)
			if !ok {
				break
			}
			r := sh.records[it.key]
			if r != it.rec {
				continue
			}
			if now < r.removeAt {
				// Renewed, taken over or completed since the item was
				// pushed: its removal moved later.
				q.push(expiryItem{at: r.removeAt, key: it.key, rec: r})
				continue
			}
			if r.state != completed {
				// A claim in progress past lease + TTL: kept until it is
				// completed, released or taken over (see live), or evicted
				// first when space is needed. It has no queue item from now
				// on; the next setRemoveAt gives it one.
				r.removeAt = 0
				sh.addAbandoned(it)
				continue
			}
			sh.remove(it.key, r)
		}
	}
}

// setRemoveAt schedules r's removal d after now. A queue item is added when
// the time moves earlier by more than a lease (a Complete moves it a little
// earlier than its claim did: the old item then removes it a little late,
// which costs some memory but no correctness, since live checks every record
// it reads); moving it later needs none: the old item is re-queued when it
// falls due.
func (sh *shard) setRemoveAt(key string, r *record, now tick, d time.Duration) {
	at := now.after(d)
	push := r.removeAt == 0 || r.removeAt-at > ticks(r.lease) // at + lease < removeAt, which can wrap
	r.removeAt = at
	if push {
		sh.expiry.queue(d).push(expiryItem{at: at, key: key, rec: r})
	}
}
