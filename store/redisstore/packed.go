package redisstore

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/idemrt/idem/store"
)

// A record is one Redis string value, a layout byte, two state bytes,
// then three length-prefixed byte strings with a number before the second
// (and, in layout 4, one more before it):
//
//	3 <state> <waiters> <fence> : <len owner> : <owner> <ms> : <len fp> : <fp> <result>
//	4 <state> <waiters> <fence> : <len owner> : <owner> <attempt> : <ms> : <len fp> : <fp>
//
// with no spaces, e.g. "4p060566400000000:21:" owner "1:86340000:32:"
// fingerprint. Its fields:
//
//	3, 4     the layout, byte 0: 3 for a completed record (c, f), and for a
//	         claim (p, r) written before the store counted attempts; 4 for
//	         a claim written since, which keeps its attempt. A value that
//	         starts with neither is no record of format v3 (corrupt, never
//	         misread), and so is a completed record of layout 4
//	state    byte 1: p (in progress), c (completed), f (permanent error),
//	         r (released)
//	waiters  byte 2: 1 when the waiter set may hold waiters of other
//	         instances (set by the claim that adds one), else 0; a finish
//	         reads the waiter set only when it is 1
//	fence    decimal, at least 1: the fence of the claim that holds (p),
//	         produced (c, f) or gave back (r) the record: a claim that
//	         creates the record takes the floor of the server's clock
//	         when the claim script runs (internal/fence, luaFloor), every
//	         later claim of the string the fence + 1 or that floor, if
//	         larger
//	owner    the owner of that claim
//	attempt  layout 4: decimal, at least 1, the claims of the record (p),
//	         1 for the claim that created it, one more for each takeover;
//	         a claim of layout 3 counts as 1
//	ms       decimal milliseconds: in progress, how long the record
//	         outlives the lease, the TTL of the claim or more (the lease
//	         ends when PTTL falls to ms);
//	         completed, the TTL it was stored with (so it was stored at
//	         expiry − ms)
//	fp       the fingerprint of that request
//	result   completed: the encoded value (c) or error message (f)
//
// Numbers are canonical decimals up to 2^53. Times are never written: the
// record's expiry (PX, by the server's clock) carries both the lease and
// the completion time, so no script calls TIME and a claim of a new key
// needs no script at all (see Store.prepare). Bytes 1 and 2 sit at fixed
// offsets, so a script flips them in place with SETRANGE, keeping the
// expiry. The token (fence and owner) comes right after them, so the
// finish script checks that the record is held by the caller's token by
// comparing bytes 3... with the token's encoding (tokenTag), without
// parsing the record.
const (
	layout3    = '3' // completed records, and claims written before attempts
	layout4    = '4' // claims, with their attempt
	offState   = 1   // SETRANGE offsets used by the scripts
	offWaiters = 2
)

// maxHeaderNumber bounds a header number (2^53), so that Lua's doubles
// and Go's int64 hold it exactly; it has 16 digits.
const maxHeaderNumber = 1 << 53

// packed is a decoded record value.
type packed struct {
	layout  byte // layout3 or layout4
	state   byte
	waiters bool
	fence   uint64
	attempt int64 // layout4 only
	ms      int64
	owner   []byte
	fp      []byte
	result  []byte
}

// encode returns p as a record value.
func (p packed) encode() []byte {
	b := make([]byte, 0, 48+len(p.owner)+len(p.fp)+len(p.result))
	w := byte('0')
	if p.waiters {
		w = '1'
	}
	b = append(b, p.layout, p.state, w)
	b = appendToken(b, p.fence, p.owner)
	if p.layout == layout4 {
		b = strconv.AppendInt(b, p.attempt, 10)
		b = append(b, ':')
	}
	b = strconv.AppendInt(b, p.ms, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(len(p.fp)), 10)
	b = append(b, ':')
	b = append(b, p.fp...)
	return append(b, p.result...)
}

// appendToken appends <fence>:<len owner>:<owner>, the token part of a
// record value.
func appendToken[T string | []byte](b []byte, fence uint64, owner T) []byte {
	b = strconv.AppendUint(b, fence, 10)
	b = append(b, ':')
	b = strconv.AppendInt(b, int64(len(owner)), 10)
	b = append(b, ':')
	return append(b, owner...)
}

// tokenTag is what a record held or completed by tok holds from byte 3
// on (see the format above).
func tokenTag(tok store.Token) []byte {
	return appendToken(make([]byte, 0, 24+len(tok.Owner)), tok.Fence, tok.Owner)
}

// heldPrefix is how a record held by tok with no waiters, written by this
// version, starts: "4p0" and tok's tag (the finish script's first
// argument).
func heldPrefix(tok store.Token) []byte {
	return appendToken(append(make([]byte, 0, 27+len(tok.Owner)), layout4, 'p', '0'), tok.Fence, tok.Owner)
}

var errNotV3 = errors.New("not a v3 record (a value of another format or application)")

// decodeValue reads a record value. It accepts exactly what encode
// writes: anything else is the reason the record is corrupt.
func decodeValue(v []byte) (packed, error) {
	if len(v) == 0 || v[0] != layout3 && v[0] != layout4 {
		return packed{}, errNotV3
	}
	if len(v) < 3 {
		return packed{}, errors.New("garbled v3 header")
	}
	p := packed{layout: v[0], state: v[1]}
	switch p.state {
	case 'p', 'c', 'f', 'r':
	default:
		return packed{}, fmt.Errorf("unknown state %q", v[1])
	}
	switch v[2] {
	case '0':
	case '1':
		p.waiters = true
	default:
		return packed{}, fmt.Errorf("waiter flag %q is not 0 or 1", v[2])
	}
	rest := v[3:]
	var fl int64
	var err error
	if p.fence, p.owner, rest, err = tokenPart(rest); err != nil {
		return packed{}, err
	}
	if p.layout == layout4 {
		if p.state != 'p' && p.state != 'r' {
			return packed{}, errors.New("a completed record of layout 4")
		}
		if p.attempt, rest, err = headerNumber(rest); err != nil {
			return packed{}, err
		}
		if p.attempt == 0 {
			return packed{}, errors.New("attempt 0")
		}
	}
	if p.ms, rest, err = headerNumber(rest); err != nil {
		return packed{}, err
	}
	if fl, rest, err = headerNumber(rest); err != nil {
		return packed{}, err
	}
	if fl > int64(len(rest)) {
		return packed{}, fmt.Errorf("shorter than its header says (%d bytes of fingerprint, %d left)", fl, len(rest))
	}
	p.fp, p.result = rest[:fl], rest[fl:]
	if (p.state == 'p' || p.state == 'r') && len(p.result) > 0 {
		return packed{}, errors.New("a result after a record in progress or released")
	}
	return p, nil
}

// tokenPart reads <fence>:<len owner>:<owner> from b.
func tokenPart(b []byte) (uint64, []byte, []byte, error) {
	fence, rest, err := headerNumber(b)
	if err != nil {
		return 0, nil, nil, err
	}
	if fence == 0 {
		return 0, nil, nil, errors.New("fence 0")
	}
	ol, rest, err := headerNumber(rest)
	if err != nil {
		return 0, nil, nil, err
	}
	if ol > int64(len(rest)) {
		return 0, nil, nil, fmt.Errorf("shorter than its header says (%d bytes of owner, %d left)", ol, len(rest))
	}
	return uint64(fence), rest[:ol], rest[ol:], nil
}

// headerNumber reads one canonical decimal (no sign, no leading zero, at
// most maxHeaderNumber) and the ':' after it.
func headerNumber(b []byte) (int64, []byte, error) {
	i := 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	switch {
	case i == 0 || i >= len(b) || b[i] != ':':
		return 0, nil, errors.New("garbled v3 header")
	case i > 16:
		return 0, nil, errors.New("a number of the header is too long")
	case i > 1 && b[0] == '0':
		return 0, nil, errors.New("a number of the header has a leading zero")
	}
	n, _ := strconv.ParseInt(string(b[:i]), 10, 64)
	if n > maxHeaderNumber {
		return 0, nil, errors.New("a number of the header is too long")
	}
	return n, b[i+1:], nil
}

// completedValue is the value a Complete stores.
func completedValue(tok store.Token, rec store.Record, ttl time.Duration) []byte {
	p := packed{layout: layout3, state: 'c', fence: tok.Fence, ms: ms(ttl), owner: []byte(tok.Owner), fp: rec.Fingerprint, result: rec.Value}
	if rec.Failed {
		p.state, p.result = 'f', []byte(rec.Error)
	}
	return p.encode()
}

// maxSkewMs is how far a completed record's PTTL may exceed the TTL it
// was stored with and still be read: a server whose clock is behind the
// one that wrote the record (a failover to a replica, whose expiries are
// absolute times; an NTP step back) sees records completed less than the
// skew ago so. Such a record reads as stored at the time of reading, with
// its TTL from then. A larger excess was set by hand (or by a clock far
// off): the record is corrupt.
const maxSkewMs = 30_000

// record turns a completed value, whose Redis key had pttl ms left at the
// server when local was the local time, into a Record: the store reports
// times by the local clock, so that callers can compare them with their
// own.
func (p packed) record(pttl int64, local time.Time) (store.Record, error) {
	if p.state != 'c' && p.state != 'f' {
		return store.Record{}, fmt.Errorf("state %q where a completed record was expected", p.state)
	}
	switch {
	case pttl < 0: // -1: no expiry (set by hand)
		return store.Record{}, fmt.Errorf("record has no TTL (PTTL %d)", pttl)
	case p.ms > maxMs || pttl > p.ms+maxSkewMs:
		return store.Record{}, fmt.Errorf("record times beyond its TTL or the %v limit (TTL %d ms, PTTL %d ms)", store.MaxDuration, p.ms, pttl)
	}
	pttl = min(pttl, p.ms) // a server clock behind the writer's: stored just now
	rec := store.Record{Failed: p.state == 'f', Fingerprint: nonEmpty(p.fp),
		Token: store.Token{Fence: p.fence, Owner: string(p.owner)}}
	if rec.Failed {
		rec.Error = string(p.result)
	} else {
		rec.Value = nonEmpty(p.result)
	}
	rec.ExpiresAt = local.Add(time.Duration(pttl) * time.Millisecond)
	rec.CreatedAt = rec.ExpiresAt.Add(-time.Duration(p.ms) * time.Millisecond)
	return rec, nil
}

func nonEmpty(b []byte) []byte {
	if len(b) == 0 {
		return nil
	}
	return b
}
