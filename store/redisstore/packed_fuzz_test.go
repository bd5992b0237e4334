package redisstore

import (
	"bytes"
	"testing"
	"time"
)

// FuzzDecodeValue: any bytes at a record's name (a value edited by hand, a
// v2 or another application's string) decode without a panic, and the
// decoder accepts exactly what encode writes: a value it accepts encodes
// back to the same bytes, so no two values read as the same record and no
// garbled one is read as the nearest record. A completed one gives
// times within store.MaxDuration or an error.
func FuzzDecodeValue(f *testing.F) {
	for _, v := range []string{
		"3p01:1:o0:0:", "3p112:21:0123456789abcdef-1a2b86340000:32:" + string(bytes.Repeat([]byte("f"), 32)),
		"3c03:7:owner-13600000:2:fp\"v\"", "3f01:0:1000:0:card declined", "3r04:1:o0:0:",
		"", "3", "3p", "3p0", "3p001:1:o0:0:", "3p01:1:o0:0:extra", "3p01:9:o", "3z01:0:0:0:",
		"3p21:0:0:0:", "3p00:0:0:0:", "2c01:0:0:0:", "other app", "3c01:0:1000000000000000:0:",
		"3c01:0:-5:0:", "3c01:0: 5:0:", "3c01:0:5:0", "3c09007199254740993:0:5:0:",
		"4p060566400000000:1:o1:86340000:2:fp", "4r160566400000001:1:o2:0:0:", "4p01:1:o0:0:0:", "4c01:1:o1:1:0:v",
		"4p01:1:o1:0:0:x", "4p01:1:o01:0:0:", "4p01:1:o9007199254740993:0:0:",
	} {
		f.Add([]byte(v), int64(1000))
	}
	f.Fuzz(func(t *testing.T, v []byte, pttl int64) {
		p, err := decodeValue(v)
		if err != nil {
			return
		}
		if got := p.encode(); !bytes.Equal(got, v) {
			t.Fatalf("decodeValue(%q) = %+v, which encodes as %q", v, p, got)
		}
		if p.fence == 0 || p.ms < 0 {
			t.Fatalf("decodeValue(%q) = %+v: fence 0 or negative ms", v, p)
		}
		if p.layout == layout4 && (p.attempt < 1 || p.state == 'c' || p.state == 'f') || p.layout == layout3 && p.attempt != 0 {
			t.Fatalf("decodeValue(%q) = %+v: an attempt that does not fit the layout", v, p)
		}
		rec, err := p.record(pttl, fuzzNow)
		if err != nil {
			return
		}
		if p.state != 'c' && p.state != 'f' {
			t.Fatalf("record of %q in state %q", v, p.state)
		}
		if d := rec.ExpiresAt.Sub(fuzzNow); d < 0 || d > maxDuration() {
			t.Fatalf("record of %q (pttl %d) expires in %v", v, pttl, d)
		}
		if rec.CreatedAt.After(rec.ExpiresAt) || rec.ExpiresAt.Sub(rec.CreatedAt) > maxDuration() {
			t.Fatalf("record of %q (pttl %d): created %v, expires %v", v, pttl, rec.CreatedAt, rec.ExpiresAt)
		}
	})
}

func maxDuration() time.Duration { return time.Duration(maxMs) * time.Millisecond }
