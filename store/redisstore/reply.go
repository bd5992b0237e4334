package redisstore

import (
	"fmt"
	"strconv"
	"time"

	"github.com/idemrt/idem/store"
)

// reply reads a script's array reply, remembering the first problem.
type reply struct {
	vals []any
	err  error
}

func (r *reply) at(i int) any {
	if i >= len(r.vals) {
		if r.err == nil {
			r.err = fmt.Errorf("reply has %d elements, wanted more than %d", len(r.vals), i)
		}
		return nil
	}
	return r.vals[i]
}

func (r *reply) int(i int) int64 {
	switch v := r.at(i).(type) {
	case int64:
		return v
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil {
			return n
		}
	}
	if r.err == nil {
		r.err = fmt.Errorf("reply element %d is not an integer", i)
	}
	return 0
}

func (r *reply) uint(i int) uint64 {
	n := r.int(i)
	if n < 0 && r.err == nil {
		r.err = fmt.Errorf("reply element %d is negative", i)
	}
	return uint64(n)
}

func (r *reply) str(i int) string {
	if v, ok := r.at(i).(string); ok {
		return v
	}
	if r.err == nil {
		r.err = fmt.Errorf("reply element %d is not a string", i)
	}
	return ""
}

func (r *reply) bytes(i int) []byte {
	s := r.str(i)
	if s == "" {
		return nil
	}
	return []byte(s)
}

// maxMs is store.MaxDuration in milliseconds. No lease, TTL or record age
// the scripts produce is longer; a longer one was set by hand, and time
// arithmetic on it could overflow.
const maxMs = int64(store.MaxDuration / time.Millisecond)

// millis reads element i, a number of milliseconds within ±maxMs.
func (r *reply) millis(i int) time.Duration {
	n := r.int(i)
	if n > maxMs || n < -maxMs {
		if r.err == nil {
			r.err = fmt.Errorf("reply element %d: %d ms is beyond the %v limit", i, n, store.MaxDuration)
		}
		n = 0
	}
	return time.Duration(n) * time.Millisecond
}

// times turns the server's completion time, the record's PTTL and the
// server's now into local times: the store reports times by the local
// clock, so that callers can compare them with their own.
func (r *reply) times(ca, pttl, now int, local time.Time) (created, expires time.Time) {
	serverNow, done := r.int(now), r.int(ca)
	left := r.int(pttl)
	if left < 0 { // -1: no expiry (set by hand); -2: gone in the meantime
		if r.err == nil {
			r.err = fmt.Errorf("record has no TTL (PTTL %d)", left)
		}
		left = 0
	}
	// Both non-negative, so the age cannot overflow.
	if left > maxMs || done < 0 || serverNow < 0 || serverNow-done > maxMs || done-serverNow > maxMs {
		if r.err == nil {
			r.err = fmt.Errorf("record times beyond the %v limit (ca %d, PTTL %d, now %d ms)", store.MaxDuration, done, left, serverNow)
		}
		return local, local
	}
	created = local.Add(-time.Duration(serverNow-done) * time.Millisecond)
	expires = local.Add(time.Duration(left) * time.Millisecond)
	return created, expires
}

// failed reads a completed record's state at i: false for c, true for f.
func (r *reply) failed(i int) bool {
	st := r.str(i)
	if st != "c" && st != "f" && r.err == nil {
		r.err = fmt.Errorf("reply element %d: state %q is not c or f", i, st)
	}
	return st == "f"
}

// result reads element i into rec: its error message when rec.Failed, else
// its value.
func (r *reply) result(rec *store.Record, i int) {
	if rec.Failed {
		rec.Error = r.str(i)
	} else {
		rec.Value = r.bytes(i)
	}
}

// record reads {st, res, fp, fence, owner, ca, pttl, now} from i on.
func (r *reply) record(i int, now time.Time) store.Record {
	rec := store.Record{Failed: r.failed(i), Fingerprint: r.bytes(i + 2),
		Token: store.Token{Fence: r.uint(i + 3), Owner: r.str(i + 4)}}
	r.result(&rec, i+1)
	rec.CreatedAt, rec.ExpiresAt = r.times(i+5, i+6, i+7, now)
	return rec
}
