// Running them: plain `go test ./store/redisstore/` (what `make test` runs)
// runs each target's f.Add seeds and the files under testdata/fuzz/<Target>/
// (it also starts redis-server for the package's other tests; add -run Fuzz
// to run only these). To fuzz one target for longer, one target at a time:
//
//	go test -run '^$' -fuzz '^FuzzDecodeReply$' -fuzztime 10m -parallel 1 -fuzzminimizetime 2s ./store/redisstore/
//
// A failing input is written to testdata/fuzz/<Target>/: fix the bug, and
// commit the file as a permanent seed. -fuzzminimizetime keeps the engine
// from spending a minute minimising each new input (it fuzzes nothing
// meanwhile, showing "0/sec"). A bare "context deadline exceeded" at the
// end of -fuzztime with no input written is a race in Go's fuzz
// coordinator, not a finding; -fuzztime 1000000x (a count) avoids it.
//
// Fuzz targets for the decoding of script replies (decode and the reply
// reader): what comes back from Redis is outside the process's control (a
// record edited by hand, another program on the same keys), so decoding
// must never panic and must turn anything it cannot read into a
// *CorruptError that names the key. The targets need no server: they build
// the *redis.Cmd a pipeline would have filled in. They are FuzzDecodeReply
// (arbitrary replies), FuzzRecordRoundTrip (Record → finish script's
// arguments → stored value → get, claim and replay replies → Record),
// FuzzClaimRoundTrip (ClaimRequest → claim arguments → in-progress and
// claimed replies and waiter member), and
// FuzzDecodeValue (arbitrary record values, packed_fuzz_test.go).

package redisstore

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// The fuzzer's encoding of a reply: a tag byte, then the payload. Every
// byte string decodes to some reply (tags are taken modulo tagCount, short
// payloads are padded), so the engine explores replies, not parse errors.
const (
	tagInt    = iota // 8 bytes, big-endian int64
	tagString        // 2-byte length, bytes
	tagNil           // a Lua false / missing field
	tagArray         // 1-byte count, elements
	tagError         // an error reply (as an element, or the command's error)
	tagBool          // RESP3 boolean
	tagFloat         // RESP3 double, 8 bytes
	tagCount
)

// replyError is an error reply (go-redis's own type is internal).
type replyError string

func (e replyError) Error() string { return string(e) }

type replyReader struct{ b []byte }

func (r *replyReader) take(n int) []byte {
	if n > len(r.b) {
		p := make([]byte, n)
		copy(p, r.b)
		r.b = nil
		return p
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p
}

// value reads one reply value; depth bounds nested arrays.
func (r *replyReader) value(depth int) any {
	tag := r.take(1)[0] % tagCount
	if tag == tagArray && depth > 2 {
		tag = tagNil
	}
	switch tag {
	case tagInt:
		return int64(binary.BigEndian.Uint64(r.take(8)))
	case tagString:
		return string(r.take(int(binary.BigEndian.Uint16(r.take(2)))))
	case tagArray:
		n := int(r.take(1)[0])
		vals := make([]any, 0, n)
		for range n {
			if len(r.b) == 0 {
				break
			}
			vals = append(vals, r.value(depth+1))
		}
		return vals
	case tagError:
		return replyError(string(r.take(int(r.take(1)[0]))))
	case tagBool:
		return r.take(1)[0]&1 == 1
	case tagFloat:
		return math.Float64frombits(binary.BigEndian.Uint64(r.take(8)))
	}
	return nil
}

// encodeReply is the inverse of value, for seeds.
func encodeReply(v any) []byte {
	switch v := v.(type) {
	case int:
		return encodeReply(int64(v))
	case int64:
		return binary.BigEndian.AppendUint64([]byte{tagInt}, uint64(v))
	case string:
		return append(binary.BigEndian.AppendUint16([]byte{tagString}, uint16(len(v))), v...)
	case []any:
		b := []byte{tagArray, byte(len(v))}
		for _, e := range v {
			b = append(b, encodeReply(e)...)
		}
		return b
	case replyError:
		return append([]byte{tagError, byte(len(v))}, v...)
	case bool:
		if v {
			return []byte{tagBool, 1}
		}
		return []byte{tagBool, 0}
	case float64:
		return binary.BigEndian.AppendUint64([]byte{tagFloat}, math.Float64bits(v))
	}
	return []byte{tagNil}
}

// fuzzOp is the op decode answers: a plausible request of each kind.
func fuzzOp(kind store.OpKind, key string) *store.Op {
	return &store.Op{Kind: kind, Key: key,
		Claim:  store.ClaimRequest{Owner: "owner-1", Lease: time.Minute, TTL: time.Hour, Fingerprint: []byte("fp")},
		Token:  store.Token{Fence: 3, Owner: "owner-1"},
		Record: store.Record{Value: []byte(`"v"`), Fingerprint: []byte("fp")},
		TTL:    time.Hour, Lease: time.Minute}
}

var fuzzNow = time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)

// replySeeds are the replies the scripts send (see scripts.go), per op kind,
// and a few broken ones.
var replySeeds = map[store.OpKind][]any{
	store.OpClaim: {
		[]any{1, 1, 60000, 0, 1},
		[]any{1, 7, 30000, 1, 2},
		[]any{1, 60_566_400_000_000, 30000, 0, 1},
		[]any{1, 7, 30000, 1},
		[]any{1, 7, 30000, 1, 0},
		[]any{2, "3c03:7:owner-186400000:2:fp\"v\"", 86_000_000},
		[]any{2, "3f01:0:1000:0:card declined", 900},
		[]any{3, "3p12:1:o0:2:fp", 1234},
		[]any{3, "4p160566400000000:1:o3:0:2:fp", 1234},
		[]any{3, "4c160566400000000:1:o3:0:2:fp", 1234},
		[]any{-1, "not a string: hash"},
		[]any{"1", "7", "30000", "1", "2"},
		[]any{2, "3c03:1:o1000:2:fp\"v\"", -1},
		[]any{2, "3c00:1:o1000:2:fp\"v\"", 5},
		[]any{2, "3c03:1:o1000:2:fp\"v\"", int64(math.MaxInt64)},
		[]any{3, "3c03:1:o1000:2:fp\"v\"", 5},
	},
	store.OpComplete: {
		[]any{1},
		[]any{2, "3c03:7:owner-13600000:2:fp\"v\"", 3_599_000},
		[]any{2, "3f03:7:owner-11000:2:fpcard declined", 900},
		[]any{0},
		[]any{-1, "garbled v3 header"},
		[]any{},
		[]any{7},
	},
	store.OpRelease: {[]any{1}, []any{0}, []any{"x"}, []any{nil}},
	store.OpRenew:   {[]any{1}, []any{0}, []any{-1, "not a v3 record"}, []any{5}},
	store.OpGet: {
		[]any{2, "3c03:7:owner-186400000:2:fp\"v\"", 86_000_000},
		[]any{2, "3f01:0:0:0:", 0},
		[]any{0},
		[]any{-1, "shorter than its header says"},
		[]any{2, "3x03:1:o1:2:fpv", 1},
		[]any{2, "3c03:1:o1:2:fpv"},
		[]any{true},
	},
	store.OpForget: {[]any{1}, []any{0}, []any{3}, []any{4}, []any{replyError("ERR boom")}},
}

// replyCodes are the codes each script sends for each op, with the
// contract error each one means (nil: success).
var replyCodes = map[store.OpKind]map[int64]error{
	store.OpClaim:    {1: nil, 2: nil, 3: nil},
	store.OpComplete: {1: nil, 2: nil, 0: store.ErrLeaseLost},
	store.OpRelease:  {1: nil, 0: store.ErrLeaseLost},
	store.OpRenew:    {1: nil, 0: store.ErrLeaseLost},
	store.OpGet:      {2: nil, 0: store.ErrNotFound},
	store.OpForget:   {1: nil, 0: nil, 3: store.ErrInProgress},
}

// replyCode reads the code of a reply as decode should: an integer, or a
// string holding one.
func replyCode(vals []any) (int64, bool) {
	if len(vals) == 0 {
		return 0, false
	}
	switch v := vals[0].(type) {
	case int64:
		return v, true
	case string:
		n, err := strconv.ParseInt(v, 10, 64)
		return n, err == nil
	}
	return 0, false
}

// FuzzDecodeReply: for any reply to any op, decode does not panic and
// reports exactly one of: the command's own error (a reply that is no
// array), the contract error the reply's code stands for, success with a
// result of the documented shape, or a *CorruptError naming the key and
// its Redis key. A code the op's script never sends, or no code at all, is
// corrupt, never success or a contract error.
func FuzzDecodeReply(f *testing.F) {
	for kind := store.OpClaim; kind <= store.OpForget; kind++ {
		for _, r := range replySeeds[kind] {
			f.Add(uint8(kind-1), "order-1", encodeReply(r))
		}
	}
	f.Add(uint8(0), "k", []byte{tagString, 0, 2, 'o', 'k'})      // not an array
	f.Add(uint8(4), "k", []byte{tagError, 3, 'E', 'R', 'R'})     // the command failed
	f.Add(uint8(4), "a\"b\x00", []byte{tagArray, 1, tagInt})     // a key %q must escape
	f.Add(uint8(1), "k", []byte{tagArray, 2, tagNil, tagString}) // truncated
	f.Fuzz(func(t *testing.T, kindN uint8, key string, raw []byte) {
		kind := store.OpKind(1 + kindN%6)
		s := &Store{prefix: "idem:", inbox: "idem:inbox:"}
		op := fuzzOp(kind, key)
		rr := &replyReader{b: raw}
		val := rr.value(0)
		var cmdErr error
		if e, ok := val.(replyError); ok {
			val, cmdErr = nil, e
		}
		decodeReply(s, op, val, cmdErr, fuzzNow)

		vals, isArray := val.([]any)
		if !isArray {
			if op.Err == nil || errors.As(op.Err, new(*CorruptError)) {
				t.Fatalf("%v reply %#v (error %v): op.Err = %v, want the command's error", kind, val, cmdErr, op.Err)
			}
			return
		}
		code, hasCode := replyCode(vals)
		want, known := replyCodes[kind][code]
		var ce *CorruptError
		if errors.As(op.Err, &ce) {
			// (A -1 reply's reason is the script's text, "" if it sent none.)
			if ce.Key != key || ce.RedisKey != s.RecordKey(key) || (ce.Reason == "" && code != -1) ||
				!strings.Contains(ce.Error(), fmt.Sprintf("%q", key)) || !strings.Contains(ce.Error(), ce.RedisKey) {
				t.Fatalf("%v reply %#v: CorruptError %+v does not name key %q", kind, vals, ce, key)
			}
			if hasCode && known && want != nil {
				t.Fatalf("%v reply %#v: corrupt, want %v", kind, vals, want)
			}
			return
		}
		if !hasCode || !known {
			t.Fatalf("%v reply %#v with no known code: op.Err = %v, result %+v; want a CorruptError", kind, vals, op.Err, op.Result)
		}
		if op.Err != want {
			t.Fatalf("%v reply %#v: op.Err = %v, want %v", kind, vals, op.Err, want)
		}
		if op.Err == nil {
			checkShape(t, kind, code, vals, op)
		}
	})
}

// checkShape checks a successful decode against the reply it came from.
func checkShape(t *testing.T, kind store.OpKind, code int64, vals []any, op *store.Op) {
	t.Helper()
	res := op.Result
	if res.LeaseLeft > store.MaxDuration || res.LeaseLeft < -store.MaxDuration {
		t.Fatalf("%v reply %#v: lease left %v is beyond the limit", kind, vals, res.LeaseLeft)
	}
	var rec *store.Record
	switch {
	case kind == store.OpClaim && code == 1:
		if res.Status != store.Claimed || res.Token.Owner != op.Claim.Owner {
			t.Fatalf("claimed reply %#v: result %+v", vals, res)
		}
	case kind == store.OpClaim && code == 3:
		if res.Status != store.InProgress || res.Token.Owner != "" {
			t.Fatalf("in-progress reply %#v: result %+v", vals, res)
		}
	case kind == store.OpClaim && code == 2:
		if res.Status != store.Completed {
			t.Fatalf("completed reply %#v: result %+v", vals, res)
		}
		rec = &res.Record
	case kind == store.OpGet || kind == store.OpComplete:
		rec = &res.Record
	case kind == store.OpForget:
		if want := map[int64]store.Status{1: store.Completed}[code]; res.Status != want {
			t.Fatalf("forget reply %#v: status %v, want %v", vals, res.Status, want)
		}
	}
	if rec == nil {
		return
	}
	if rec.Failed && rec.Value != nil || !rec.Failed && rec.Error != "" {
		t.Fatalf("%v reply %#v: record %+v holds both a value and an error", kind, vals, rec)
	}
	if rec.ExpiresAt.Before(fuzzNow) || rec.ExpiresAt.After(fuzzNow.Add(store.MaxDuration)) {
		t.Fatalf("%v reply %#v: a live record expires at %v, now is %v", kind, vals, rec.ExpiresAt, fuzzNow)
	}
	if d := rec.CreatedAt.Sub(fuzzNow); d > store.MaxDuration || d < -store.MaxDuration {
		t.Fatalf("%v reply %#v: record created at %v, now is %v", kind, vals, rec.CreatedAt, fuzzNow)
	}
	if code == 2 {
		v, _ := vals[1].(string)
		if p, err := decodeValue([]byte(v)); err != nil || p.state != 'c' && p.state != 'f' {
			t.Fatalf("%v reply %#v: value %q read as a completed record", kind, vals, v)
		}
	}
}

// redisArg is what Redis receives for one script argument, as go-redis
// writes it; an argument of another type fails the test.
func redisArg(t *testing.T, a any) string {
	t.Helper()
	switch a := a.(type) {
	case string:
		return a
	case []byte:
		return string(a)
	case int64:
		return strconv.FormatInt(a, 10)
	case int:
		return strconv.Itoa(a)
	case uint64:
		return strconv.FormatUint(a, 10)
	}
	t.Fatalf("script argument %#v of type %T", a, a)
	return ""
}

// luaNumber is tonumber(s) in the scripts turned back into an integer reply
// (Lua numbers are doubles; Redis truncates them to integers).
func luaNumber(t *testing.T, s string) int64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("tonumber(%q) is nil", s)
	}
	return int64(f)
}

// FuzzRecordRoundTrip: a record completed through the store and read back
// (by get, by a claim that finds it, and by the completing owner's replay)
// is the record given, field for field: Value bytes, Failed, Error,
// Fingerprint, Token, and the times to the millisecond. The Go side is the
// store's own code (prepare encodes, decode decodes); the finish and get
// scripts in between are modelled by what they store and return.
func FuzzRecordRoundTrip(f *testing.F) {
	f.Add([]byte(`{"id":42}`), false, "", []byte("fp"), uint64(1), "owner-1", int64(time.Hour), int64(1000), int64(1_700_000_000_000))
	f.Add([]byte(nil), true, "card declined", []byte(nil), uint64(7), "0123456789abcdef-1a2b", int64(time.Minute), int64(0), int64(0))
	f.Add([]byte{}, false, "", []byte{0, 0xff}, uint64(1<<53), "", int64(store.MaxDuration), int64(store.MaxDuration), int64(-5))
	f.Add([]byte("ignored"), true, "", []byte("\x00"), uint64(math.MaxUint64), "o:w\x00", int64(1), int64(-1), int64(math.MaxInt64))
	f.Add([]byte("\x00\xff\r\n"), false, "not kept", []byte(strings.Repeat("f", 32)), uint64(2), "ключ", int64(-1), int64(1<<62), int64(42))
	f.Fuzz(func(t *testing.T, value []byte, failed bool, errMsg string, fp []byte, fence uint64, owner string, ttlN, ageN, nowN int64) {
		// Inputs the store can meet: a valid TTL, a fence a Lua double holds
		// exactly, a record age within its TTL, server times in 0..2^50 ms.
		ttl := store.MaxDuration
		if ttlN != math.MinInt64 && ttlN != 0 {
			ttl = time.Duration(max(ttlN, -ttlN)) % store.MaxDuration
		}
		ttl = max(ttl, time.Millisecond)
		fence = 1 + fence%(1<<53)
		ttlMs := ms(ttl)
		age := int64(uint64(ageN) % uint64(ttlMs+1))
		serverNow := int64(uint64(nowN)%(1<<50)) + age

		s := &Store{prefix: "idem:", inbox: "idem:inbox:"}
		key := "order-1"
		tok := store.Token{Fence: fence, Owner: owner}
		given := store.Record{Value: value, Failed: failed, Error: errMsg, Fingerprint: fp}
		op := &store.Op{Kind: store.OpComplete, Key: key, Token: tok, Record: given, TTL: ttl}
		c, ok := s.prepare(op)
		if !ok {
			t.Fatalf("prepare(%+v): %v", op, op.Err)
		}
		if len(c.args) != 4 {
			t.Fatalf("finish arguments %#v", c.args)
		}
		// The finish script on the owner's in-progress record: ARGV = "4p0"
		// and the token's tag, the completed value, ttl ms; it stores the
		// value for ttl ms when the record holds the tag from byte 3 on
		// (a record of layout 3, written before attempts were counted,
		// too: the script's slower path compares from byte 3 on).
		held := packed{layout: layout4, state: 'p', fence: fence, attempt: 2, owner: []byte(owner), fp: fp, ms: 5}.encode()
		if got, want := redisArg(t, c.args[0]), "4p0"+string(tokenTag(tok)); got != want || !strings.HasPrefix(string(held), got) {
			t.Fatalf("finish prefix %q, want %q, a prefix of the held record %q", got, want, held)
		}
		old := packed{layout: layout3, state: 'p', fence: fence, owner: []byte(owner), fp: fp, ms: 5}.encode()
		if got := redisArg(t, c.args[0]); got[3:] != string(old[3:3+len(got)-3]) {
			t.Fatalf("finish tag %q is not the tag of the layout 3 record %q", got[3:], old)
		}
		if got := luaNumber(t, redisArg(t, c.args[2])); got != ttlMs {
			t.Fatalf("finish ttl %d ms, want %d", got, ttlMs)
		}
		stored := redisArg(t, c.args[1])
		if p, err := decodeValue([]byte(stored)); err != nil || string(p.owner) != owner || p.fence != fence ||
			!strings.HasPrefix(stored[3:], string(tokenTag(tok))) {
			t.Fatalf("completed value %q: %+v, %v; its token differs from the script's tag", stored, p, err)
		}
		pttl := ttlMs - age
		_ = serverNow

		want := store.Record{Failed: failed, Fingerprint: fp, Token: tok,
			CreatedAt: fuzzNow.Add(-time.Duration(age) * time.Millisecond),
			ExpiresAt: fuzzNow.Add(time.Duration(pttl) * time.Millisecond)}
		if failed {
			want.Error = errMsg
		} else {
			want.Value = value
		}
		if len(want.Value) == 0 {
			want.Value = nil
		}

		// get: {2, value, pttl}
		reply := []any{int64(2), stored, pttl}
		get := &store.Op{Kind: store.OpGet, Key: key}
		decodeReply(s, get, reply, nil, fuzzNow)
		sameRecord(t, "get", get.Err, get.Result.Record, want)

		// claim of a completed key: the same reply.
		cl := fuzzOp(store.OpClaim, key)
		decodeReply(s, cl, reply, nil, fuzzNow)
		if cl.Result.Status != store.Completed && cl.Err == nil {
			t.Fatalf("claim of a completed record: %+v", cl.Result)
		}
		sameRecord(t, "claim", cl.Err, cl.Result.Record, want)

		// finish run again by the owner (a retried pipeline): the same reply.
		again := *op
		decodeReply(s, &again, reply, nil, fuzzNow)
		sameRecord(t, "replay", again.Err, again.Result.Record, want)

		// finish done: {1}; the record is the one given.
		done := *op
		decodeReply(s, &done, []any{int64(1)}, nil, fuzzNow)
		want.CreatedAt, want.ExpiresAt = fuzzNow, fuzzNow.Add(ttl)
		if !failed {
			want.Value = value
		}
		sameRecord(t, "complete", done.Err, done.Result.Record, want)
	})
}

func sameRecord(t *testing.T, path string, err error, got, want store.Record) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if !bytes.Equal(got.Value, want.Value) || got.Failed != want.Failed || got.Error != want.Error ||
		!bytes.Equal(got.Fingerprint, want.Fingerprint) || got.Token != want.Token ||
		!got.CreatedAt.Equal(want.CreatedAt) || !got.ExpiresAt.Equal(want.ExpiresAt) {
		t.Fatalf("%s: record\n%+v\nwant\n%+v", path, got, want)
	}
	if got.Failed && got.Value != nil {
		t.Fatalf("%s: failed record with a value %q", path, got.Value)
	}
}

// FuzzClaimRoundTrip: a claim's arguments carry the owner, the lease and
// TTL rounded up to whole milliseconds (never to zero), and the
// fingerprint; the in-progress reply built from what the claim stored gives
// the holder's fingerprint and fence back; and the waiter member the
// finish script splits at its first ':' gives back the instance id and the
// key, whatever the key holds.
func FuzzClaimRoundTrip(f *testing.F) {
	f.Add("owner-1", int64(time.Minute), int64(24*time.Hour), []byte("fp"), "order-1", uint64(1), int64(59_000))
	f.Add("o", int64(1), int64(1), []byte(nil), "a:b:c", uint64(1<<53), int64(0))
	f.Add("o:w", int64(time.Millisecond+1), int64(store.MaxDuration), []byte{0xff, 0}, "ff:idemp:t%3A::k", uint64(9), int64(-3))
	f.Fuzz(func(t *testing.T, owner string, leaseN, ttlN int64, fp []byte, key string, fence uint64, leftMs int64) {
		if owner == "" || store.ValidateKey(key) != nil {
			return
		}
		lease := time.Duration(uint64(leaseN)%uint64(store.MaxDuration)) + 1
		ttl := time.Duration(uint64(ttlN)%uint64(store.MaxDuration)) + 1
		fence = 1 + fence%(1<<53)
		s := &Store{prefix: "idem:", inbox: "idem:inbox:"}
		op := &store.Op{Kind: store.OpClaim, Key: key,
			Claim: store.ClaimRequest{Owner: owner, Lease: lease, TTL: ttl, Fingerprint: fp, Waiter: "0123456789abcdef"}}
		c, ok := s.prepare(op)
		if !ok {
			t.Fatalf("prepare claim: %v", op.Err)
		}
		if got := redisArg(t, c.args[0]); got != owner {
			t.Fatalf("claim owner %q, want %q", got, owner)
		}
		for i, d := range map[int]time.Duration{1: lease, 2: ttl} {
			n := luaNumber(t, redisArg(t, c.args[i]))
			if n < 1 || time.Duration(n)*time.Millisecond < d || time.Duration(n-1)*time.Millisecond >= d {
				t.Fatalf("claim argument %d: %d ms for %v", i, n, d)
			}
		}
		m := redisArg(t, c.args[4])
		inst, k, found := strings.Cut(m, ":")
		if !found || inst != op.Claim.Waiter || k != key {
			t.Fatalf("waiter member %q splits as %q, %q", m, inst, k)
		}

		// No argument carries a fence: the script takes the floor from
		// the server's clock. The sixth is the dead owner, none here.
		if len(c.args) != 6 || redisArg(t, c.args[5]) != "" {
			t.Fatalf("claim arguments %q: want 6, the last the dead owner (none)", c.args)
		}

		// Another owner's claim meets the record in progress: {3, value,
		// lease left}, the value as the claim script stores a new record
		// (layout 4, attempt 1, kept lease + ttl ms) with this fence.
		lease1, ttl1 := luaNumber(t, redisArg(t, c.args[1])), luaNumber(t, redisArg(t, c.args[2]))
		held := packed{layout: layout4, state: 'p', fence: fence, attempt: 1, ms: ttl1, owner: []byte(owner), fp: fp}
		other := fuzzOp(store.OpClaim, key)
		decodeReply(s, other, []any{int64(3), string(held.encode()), leftMs}, nil, fuzzNow)
		r := other.Result
		if other.Err != nil || r.Status != store.InProgress || r.Token != (store.Token{Fence: fence}) ||
			!bytes.Equal(r.Fingerprint, fp) || r.LeaseLeft != time.Duration(leftMs)*time.Millisecond {
			t.Fatalf("in-progress reply: %+v, %v", r, other.Err)
		}
		// The claim itself: {1, fence, lease ms, takeover, attempt}.
		decodeReply(s, op, []any{int64(1), int64(fence), lease1, int64(0), int64(3)}, nil, fuzzNow)
		if op.Err != nil || op.Result.Status != store.Claimed || op.Result.Token != (store.Token{Fence: fence, Owner: owner}) ||
			op.Result.Attempt != 3 || op.Result.LeaseLeft < lease || op.Result.Takeover {
			t.Fatalf("claimed reply: %+v, %v", op.Result, op.Err)
		}
	})
}
