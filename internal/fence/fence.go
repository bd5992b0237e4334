// Package fence is the time part of the fencing tokens that idem's stores
// hand out, shared so that every store counts in the same unit.
//
// A store hands out, for a key, fences above every earlier one, without
// keeping anything once a key's record is gone: a claim that starts a
// record takes at least the microseconds from [Epoch] to the claim's time
// ([Floor]), and every later claim of the record (a takeover) the record's
// fence + 1, or that floor if it is larger. A record that ended (it
// expired, or was forgotten) is followed by a later claim, whose floor is
// larger than every fence the record reached, as long as the clock that
// gives the floor did not go back and the record's claims did not run
// ahead of it (one claim of a key per microsecond, on average, over the
// record's life). The unit is the microsecond, not the millisecond, because
// a key can be claimed, completed, forgotten and claimed again within one
// millisecond. Fences stop at [Max] (2^53, which a Lua double and a
// JavaScript number hold exactly): 2^53 microseconds from Epoch end in the
// year 2310.
package fence

import "time"

// Epoch is where fence time starts: 2025-01-01 00:00:00 UTC. Fences
// handed out before stores derived them from time were small counters,
// far below any floor since then.
var Epoch = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// EpochUnix is Epoch in seconds since 1970 (for SQL).
const EpochUnix = 1735689600

// Max is the largest fence: 2^53.
const Max = 1 << 53

// Floor returns the lowest fence a claim that starts a key's record at t
// takes: the whole microseconds from Epoch to t, at least 1 (a clock
// before Epoch gives 1) and at most Max.
func Floor(t time.Time) uint64 {
	us := t.Sub(Epoch) / time.Microsecond
	switch {
	case us < 1:
		return 1
	case us > Max:
		return Max
	}
	return uint64(us)
}
