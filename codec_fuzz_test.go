// Running them: plain `go test .` (what `make test` runs) runs each target's
// f.Add seeds and the files under testdata/fuzz/<Target>/. To fuzz one
// target for longer, one target at a time:
//
//	go test -run '^$' -fuzz '^FuzzJSONStruct$' -fuzztime 10m -parallel 1 -fuzzminimizetime 2s .
//
// A failing input is written to testdata/fuzz/<Target>/: fix the bug, and
// commit the file as a permanent seed. -fuzzminimizetime keeps the engine
// from spending a minute minimising each new input (it fuzzes nothing
// meanwhile, showing "0/sec"). A bare "context deadline exceeded" at the
// end of -fuzztime with no input written is a race in Go's fuzz
// coordinator, not a finding; -fuzztime 1000000x (a count) avoids it.
//
// Fuzz targets for the codec (codec.go) and for how results and permanent
// errors come back from the store: a stored value is bytes from outside the
// process (another version of the program, another process, a hand edit),
// and every replay must give the caller what the owner got, or an error.
// The targets: FuzzJSONString, FuzzJSONBytes, FuzzJSONStruct, FuzzJSONMap
// (Marshal → Unmarshal round trips), FuzzJSONUnmarshal (arbitrary bytes),
// FuzzReplayStoredValue (arbitrary stored records through Do),
// FuzzResultReplay (a string result stored and replayed) and
// FuzzPermanentReplay (a permanent error stored and replayed).

package idem_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// coerced is s as encoding/json writes it: each byte that is not part of
// valid UTF-8 becomes U+FFFD. (A string result that is not valid UTF-8
// replays changed; see idem.JSON.)
func coerced(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 {
			b.WriteRune(utf8.RuneError)
		} else {
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

// coercedMap is m as it comes back from JSON: keys coerced, and where two
// keys coerce to the same one, the value of the later key in sorted order
// (encoding/json writes keys sorted; the decoder keeps the last).
func coercedMap(m map[string]int) map[string]int {
	if m == nil {
		return nil
	}
	out := make(map[string]int, len(m))
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}) {
		out[coerced(k)] = m[k]
	}
	return out
}

// roundTrip encodes v with idem.JSON and decodes it into a new T.
func roundTrip[T any](t *testing.T, v T) (T, bool) {
	t.Helper()
	data, err := idem.JSON.Marshal(v)
	if err != nil {
		return v, false
	}
	var got T
	if err := idem.JSON.Unmarshal(data, &got); err != nil {
		t.Fatalf("Unmarshal(Marshal(%#v) = %q): %v", v, data, err)
	}
	return got, true
}

// FuzzJSONString: every string encodes, and decodes to itself when it is
// valid UTF-8; otherwise each invalid byte comes back as U+FFFD.
func FuzzJSONString(f *testing.F) {
	for _, s := range []string{"", "v", `"quoted"`, `\`, "line\nbreak\t", "\x00\x1f", "<&>", "\u2028\u2029",
		"ключ", "😀", "\xff", "a\xc3", "\xed\xa0\x80", "\uFFFD", "\xef\xbf\xbd\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := roundTrip(t, s)
		if !ok {
			t.Fatalf("Marshal(%q) failed", s)
		}
		if want := coerced(s); got != want {
			t.Fatalf("round trip of %q = %q, want %q", s, got, want)
		}
	})
}

// FuzzJSONBytes: a []byte comes back byte for byte, nil as nil and empty as
// empty.
func FuzzJSONBytes(f *testing.F) {
	for _, b := range [][]byte{nil, {}, {0}, {0xff, 0xfe}, []byte("hello"), []byte(`{"a":1}`), make([]byte, 1000)} {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, in := range [][]byte{b, nil} {
			got, ok := roundTrip(t, in)
			if !ok || string(got) != string(in) || (got == nil) != (in == nil) {
				t.Fatalf("round trip of %#v = %#v, %v", in, got, ok)
			}
		}
	})
}

// payload is a result with several field kinds.
type payload struct {
	S    string         `json:"s"`
	I    int64          `json:"i"`
	U    uint32         `json:"u,omitempty"`
	B    bool           `json:"b"`
	F    float64        `json:"f"`
	Raw  []byte         `json:"raw"`
	P    *string        `json:"p,omitempty"`
	L    []string       `json:"l"`
	M    map[string]int `json:"m"`
	T    time.Time      `json:"t"`
	N    nested         `json:"n"`
	hide int            // unexported: never encoded
}

type nested struct {
	X int8
	Y float32
}

// samePayload compares two payloads, times by Equal.
func samePayload(a, b payload) bool {
	if !a.T.Equal(b.T) {
		return false
	}
	a.T, b.T = time.Time{}, time.Time{}
	return reflect.DeepEqual(a, b)
}

// FuzzJSONStruct: a struct result comes back field for field (strings
// coerced to UTF-8, times Equal, nil and empty slices and maps kept apart,
// unexported fields zero), and Marshal fails exactly for what JSON cannot
// hold: a NaN or infinite float, a time outside years 0 to 9999.
func FuzzJSONStruct(f *testing.F) {
	f.Add("order", int64(42), uint32(7), true, 9.99, []byte("raw"), "a,b,c", int64(1_700_000_000), int64(123_456_789), int8(-3), float32(0.1))
	f.Add("", int64(math.MinInt64), uint32(0), false, 0.0, []byte(nil), "", int64(0), int64(0), int8(0), float32(0))
	f.Add("\xff", int64(math.MaxInt64), uint32(math.MaxUint32), true, math.Copysign(0, -1), []byte{}, ",", int64(-62135596800), int64(-1), int8(127), float32(math.MaxFloat32))
	f.Add("s", int64(1), uint32(1), false, math.NaN(), []byte{1}, "x", int64(0), int64(0), int8(1), float32(1))
	f.Add("s", int64(1), uint32(1), false, 1e308, []byte{1}, "\xfe,\xff", int64(253402300800), int64(0), int8(1), float32(math.Inf(1)))
	f.Add("s", int64(1), uint32(1), false, 5e-324, []byte{1}, "k,k", int64(-62167219201), int64(999_999_999), int8(1), float32(1e-45))
	f.Fuzz(func(t *testing.T, s string, i int64, u uint32, b bool, fl float64, raw []byte, list string, sec, nsec int64, x int8, y float32) {
		v := payload{S: s, I: i, U: u, B: b, F: fl, Raw: raw, T: time.Unix(sec, nsec).UTC(), N: nested{X: x, Y: y}, hide: 1}
		if b {
			v.P = &s
		}
		if list != "" {
			v.L = strings.Split(list, ",")
			v.M = make(map[string]int)
			for j, k := range v.L {
				v.M[k] = j - len(v.L)/2
			}
		}
		badFloat := math.IsNaN(fl) || math.IsInf(fl, 0) || math.IsNaN(float64(y)) || math.IsInf(float64(y), 0)
		badTime := v.T.Year() < 0 || v.T.Year() > 9999
		got, ok := roundTrip(t, v)
		if ok == (badFloat || badTime) {
			t.Fatalf("Marshal(%+v): ok=%v, but NaN/Inf=%v, year=%d", v, ok, badFloat, v.T.Year())
		}
		if !ok {
			return
		}
		want := v
		want.hide = 0
		want.S = coerced(s)
		if v.P != nil {
			want.P = &want.S
		}
		if v.L != nil {
			want.L = make([]string, len(v.L))
			for j, k := range v.L {
				want.L[j] = coerced(k)
			}
		}
		want.M = coercedMap(v.M)
		if !samePayload(got, want) {
			t.Fatalf("round trip of\n%+v =\n%+v, want\n%+v", v, got, want)
		}
	})
}

// FuzzJSONMap: a map[string]int comes back entry for entry (keys coerced
// to UTF-8; two keys that coerce alike keep the value of the later one).
func FuzzJSONMap(f *testing.F) {
	f.Add("a,b,c", int64(1))
	f.Add("", int64(0))
	f.Add("\xff,\xfe,\uFFFD", int64(-1))
	f.Add("x,x,,", int64(math.MaxInt64))
	f.Fuzz(func(t *testing.T, keys string, base int64) {
		var m map[string]int
		if keys != "" {
			m = make(map[string]int)
			for j, k := range strings.Split(keys, ",") {
				m[k] = int(base) + j
			}
		}
		got, ok := roundTrip(t, m)
		if want := coercedMap(m); !ok || !reflect.DeepEqual(got, want) {
			t.Fatalf("round trip of %#v = %#v, %v; want %#v", m, got, ok, want)
		}
	})
}

// decodeStable decodes data into a new T; when that works, the value
// encodes and decodes back to itself (what a replay of a replay gives).
func decodeStable[T any](t *testing.T, data []byte, same func(a, b T) bool) error {
	t.Helper()
	var v T
	if err := idem.JSON.Unmarshal(data, &v); err != nil {
		return err
	}
	again, ok := roundTrip(t, v)
	if !ok {
		t.Fatalf("Unmarshal(%q) gave %#v, which does not encode", data, v)
	}
	if !same(v, again) {
		t.Fatalf("Unmarshal(%q) = %#v, which round-trips to %#v", data, v, again)
	}
	return nil
}

func deepEqual[T any](a, b T) bool { return reflect.DeepEqual(a, b) }

// FuzzJSONUnmarshal: decoding arbitrary bytes into each result type never
// panics; it fails on every input that is not JSON, and what it decodes is
// stable under a further round trip.
func FuzzJSONUnmarshal(f *testing.F) {
	for _, s := range []string{`"v"`, `null`, `42`, `1e400`, `-0`, `"\ud800"`, `"\u0000"`, "\"\xff\"", `[]`, `{}`,
		`{"s":"x","i":1,"u":2,"b":true,"f":1.5,"raw":"cmF3","p":"y","l":["a"],"m":{"a":1},"t":"2026-12-01T12:00:00Z","n":{"X":1,"Y":0.5}}`,
		`{"t":"0000-01-01T00:00:00+23:59"}`, `{"t":"9999-12-31T23:59:59-23:59"}`, `{"S":"case"}`, `{"raw":"!!"}`,
		`{"m":{"a":1,"a":2}}`, `{"n":{"X":300}}`, `[1,[2,[3]]]`, `{"a":`, `"`, ``, ` `, `tru`, `"cmF3"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		errs := []error{
			decodeStable(t, data, deepEqual[string]),
			decodeStable(t, data, deepEqual[[]byte]),
			decodeStable(t, data, deepEqual[map[string]int]),
			decodeStable(t, data, samePayload),
			decodeStable(t, data, deepEqual[any]),
		}
		if !json.Valid(data) {
			for i, err := range errs {
				var se *json.SyntaxError
				if !errors.As(err, &se) {
					t.Fatalf("Unmarshal(%q), type %d, of invalid JSON: %v; want a *json.SyntaxError", data, i, err)
				}
			}
		}
	})
}

// fuzzRuntimes starts n runtimes over one in-memory store, shared by all
// the inputs of a fuzz target (so that an input costs calls, not runtime
// starts); each input uses keys of its own, from fuzzKey.
func fuzzRuntimes(f *testing.F, n int) (*memstore.Store, []*idem.Runtime) {
	st := memstore.New(memstore.Options{MaxRecords: 4096})
	f.Cleanup(func() { st.Close() })
	rts := make([]*idem.Runtime, n)
	for i := range rts {
		rts[i] = idemtest.Runtime(f, idem.Options{Store: st, Shards: 1, CacheEntries: 1024})
	}
	return st, rts
}

var fuzzKeys atomic.Int64

// fuzzKey returns a key no other input of this process uses.
func fuzzKey(prefix string) string { return fmt.Sprint(prefix, "-", fuzzKeys.Add(1)) }

// notRun is a function that must not run: the record is settled.
func notRun[T any](t *testing.T) func(context.Context) (T, error) {
	return func(context.Context) (T, error) {
		var zero T
		t.Errorf("the function ran for a settled key")
		return zero, nil
	}
}

// FuzzReplayStoredValue: a record another process stored (any bytes as the
// value, or a permanent error with any message) is replayed without running
// the function: a permanent error as a *ReplayedError with the stored
// message; a value as what the codec decodes from it, or a *CodecError
// (Op "decode") naming the key when the bytes do not decode.
func FuzzReplayStoredValue(f *testing.F) {
	f.Add([]byte(`{"s":"x","i":1,"raw":"cmF3","t":"2026-12-01T12:00:00Z"}`), false, "")
	f.Add([]byte(`null`), false, "")
	f.Add([]byte(``), false, "")
	f.Add([]byte(`{"i":"not a number"}`), false, "")
	f.Add([]byte("\xff"), false, "")
	f.Add([]byte(nil), true, "card declined")
	f.Add([]byte(`{"s":"ignored"}`), true, "")
	f.Add([]byte(nil), true, "\xff\x00%v")
	st, rts := fuzzRuntimes(f, 1)
	rt := rts[0]
	f.Fuzz(func(t *testing.T, data []byte, failed bool, msg string) {
		key := fuzzKey("stored")
		cl, err := st.Claim(bg, key, store.ClaimRequest{Owner: "other-process", Lease: time.Minute, TTL: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Complete(bg, key, cl.Token, store.Record{Value: data, Failed: failed, Error: msg}, time.Hour); err != nil {
			t.Fatal(err)
		}
		var out idem.Outcome
		v, err := idem.Do(bg, rt, key, notRun[payload](t), idem.WithOutcome(&out))
		if out != idem.Replayed {
			t.Fatalf("outcome %v, want replayed", out)
		}
		if failed {
			var re *idem.ReplayedError
			if !errors.As(err, &re) || re.Key != key || re.Message != msg || err.Error() != msg || !idem.IsPermanent(err) {
				t.Fatalf("replay of a permanent error %q: %v (%T)", msg, err, err)
			}
			return
		}
		var want payload
		if werr := json.Unmarshal(data, &want); werr != nil {
			var ce *idem.CodecError
			if !errors.As(err, &ce) || ce.Key != key || ce.Op != "decode" || ce.Err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", key)) {
				t.Fatalf("replay of %q, which does not decode (%v): %v", data, werr, err)
			}
			return
		}
		if err != nil || !samePayload(v, want) {
			t.Fatalf("replay of %q = %+v, %v; want %+v", data, v, err, want)
		}
	})
}

// FuzzPermanentReplay: a permanent error (marked with Permanent, wrapped
// around such a mark, or classified) is stored with its message; its owner
// and later callers in the same process get the original error back, and a
// process that did not see it gets a *ReplayedError with the same message,
// permanent, without running anything.
func FuzzPermanentReplay(f *testing.F) {
	for mode, msg := range []string{"card declined", "", "\xff\x00 %v \n", strings.Repeat("m", 10_000)} {
		f.Add(msg, uint8(mode))
	}
	st, rts := fuzzRuntimes(f, 2)
	a, b := rts[0], rts[1]
	f.Fuzz(func(t *testing.T, msg string, mode uint8) {
		key := fuzzKey("charge")
		orig := errors.New(msg)
		var ret error
		var opts []idem.CallOption
		switch mode % 3 {
		case 0:
			ret = idem.Permanent(orig)
		case 1:
			ret = fmt.Errorf("charge: %w", idem.Permanent(orig))
		case 2:
			ret = orig
			opts = append(opts, idem.WithClassifier(func(err error) bool { return errors.Is(err, orig) }))
		}
		stored := ret.Error()

		_, err := idem.Do(bg, a, key, func(context.Context) (string, error) { return "", ret }, opts...)
		if !errors.Is(err, orig) || !idem.IsPermanent(err) || err.Error() != stored {
			t.Fatalf("owner: %v, want the original permanent error %q", err, stored)
		}
		rec, err := st.Get(bg, key)
		if err != nil || !rec.Failed || rec.Error != stored || rec.Value != nil {
			t.Fatalf("stored record %+v, %v; want Failed with Error %q", rec, err, stored)
		}
		var out idem.Outcome
		_, err = idem.Do(bg, a, key, notRun[string](t), idem.WithOutcome(&out))
		if !errors.Is(err, orig) || out != idem.Replayed {
			t.Fatalf("replay in the owner's process: %v, %v; want the original error", err, out)
		}
		_, err = idem.Do(bg, b, key, notRun[string](t), idem.WithOutcome(&out))
		var re *idem.ReplayedError
		if !errors.As(err, &re) || re.Key != key || re.Message != stored || err.Error() != stored ||
			!idem.IsPermanent(err) || errors.Is(err, orig) || out != idem.Replayed {
			t.Fatalf("replay in another process: %v (%T), %v; want a *ReplayedError %q", err, err, out, stored)
		}
	})
}

// FuzzResultReplay: a string result stored by its owner replays in another
// process as the codec gives it back: the same string when it is valid
// UTF-8, with U+FFFD for each invalid byte otherwise (as idem.JSON
// documents), while the owner, and callers in its process, get the string
// the function returned.
func FuzzResultReplay(f *testing.F) {
	for _, s := range []string{"ok", "", "\xff", "ключ\xc3", `{"json":"in a string"}`} {
		f.Add(s)
	}
	_, rts := fuzzRuntimes(f, 2)
	a, b := rts[0], rts[1]
	f.Fuzz(func(t *testing.T, s string) {
		key := fuzzKey("result")
		v, err := idem.Do(bg, a, key, func(context.Context) (string, error) { return s, nil })
		if err != nil || v != s {
			t.Fatalf("owner: %q, %v; want %q", v, err, s)
		}
		if v, err := idem.Do(bg, a, key, notRun[string](t)); err != nil || v != s {
			t.Fatalf("replay in the owner's process: %q, %v; want %q", v, err, s)
		}
		if v, err := idem.Do(bg, b, key, notRun[string](t)); err != nil || v != coerced(s) {
			t.Fatalf("replay in another process: %q, %v; want %q", v, err, coerced(s))
		}
	})
}
