package redisstore

import (
	"fmt"
	"math"
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

// attempt reads element i, a claim's attempt: at least 1 (a larger one
// than a uint32 holds reads as the largest).
func (r *reply) attempt(i int) uint32 {
	n := r.int(i)
	if n < 1 && r.err == nil {
		r.err = fmt.Errorf("reply element %d: attempt %d", i, n)
	}
	return uint32(min(max(n, 0), math.MaxUint32))
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

// value reads element i, a record value (see packed.go).
func (r *reply) value(i int) packed {
	v := r.str(i)
	if r.err != nil {
		return packed{}
	}
	p, err := decodeValue([]byte(v))
	if err != nil {
		r.err = err
	}
	return p
}

// completed reads {value, pttl} from i on: a completed record.
func (r *reply) completed(i int, now time.Time) store.Record {
	p, pttl := r.value(i), r.int(i+1)
	if r.err != nil {
		return store.Record{}
	}
	rec, err := p.record(pttl, now)
	if err != nil {
		r.err = err
	}
	return rec
}

// held reads {value, lease left} from i on: a record in progress, its
// token (with the owner when withOwner), lease left and fingerprint.
func (r *reply) held(i int, withOwner bool) (store.Token, time.Duration, []byte) {
	p, left := r.value(i), r.millis(i+1)
	if r.err != nil {
		return store.Token{}, 0, nil
	}
	if p.state != 'p' {
		r.err = fmt.Errorf("state %q where a record in progress was expected", p.state)
		return store.Token{}, 0, nil
	}
	tok := store.Token{Fence: p.fence}
	if withOwner {
		tok.Owner = string(p.owner)
	}
	return tok, left, nonEmpty(p.fp)
}
