package redisstore

import "sync/atomic"

// firstClaims decides which claims go out as SET NX first (call.first).
// SET NX is the cheapest claim of a key that has no record, but a claim of
// a key that has one pays for it with a second round trip (the claim
// script, see Store.run). So the store keeps a moving share of the SET NX
// claims that missed; while more than half of the recent ones missed (a
// run of duplicates, of replays served by Redis, of waiters claiming
// again), claims go to the script at once, but for one in firstProbe,
// which keep the share up to date. It is a heuristic shared by concurrent
// batches without a lock: an update lost to a race only slows it down.
type firstClaims struct {
	missed atomic.Int64 // share of recent misses, in 1/firstScale
	n      atomic.Uint64
}

const (
	firstScale = 1024
	firstDecay = 16 // the share moves 1/firstDecay of the way per outcome
	firstProbe = 8
)

// use reports whether the next claim should be sent as SET NX first.
func (f *firstClaims) use() bool {
	if f.missed.Load() <= firstScale/2 {
		return true
	}
	return f.n.Add(1)%firstProbe == 0
}

// record counts the outcome of a claim sent as SET NX: miss when the key
// had a record.
func (f *firstClaims) record(miss bool) {
	m, target := f.missed.Load(), int64(0)
	if miss {
		target = firstScale
	}
	f.missed.Store(m + (target-m)/firstDecay)
}
