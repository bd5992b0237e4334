// Running them: plain `go test ./store/` (what `make test` runs) runs each
// target's f.Add seeds and the files under testdata/fuzz/<Target>/. To fuzz
// one target for longer, one target at a time:
//
//	go test -run '^$' -fuzz '^FuzzBuildParseKey$' -fuzztime 10m -parallel 1 -fuzzminimizetime 2s ./store/
//
// A failing input is written to testdata/fuzz/<Target>/: fix the bug, and
// commit the file as a permanent seed. -fuzzminimizetime keeps the engine
// from spending a minute minimising each new input (it fuzzes nothing
// meanwhile, showing "0/sec"). A bare "context deadline exceeded" at the
// end of -fuzztime with no input written is a race in Go's fuzz
// coordinator, not a finding; -fuzztime 1000000x (a count) avoids it.
//
// Fuzz targets for the key functions of key.go: keys come from outside
// (HTTP headers, command ids, flow names), so each function must hold its
// documented property for every string. The targets: FuzzValidateKey,
// FuzzBuildParseKey, FuzzParseKey, FuzzBuildKeyInjective, FuzzEscapeSegment,
// FuzzCheckDuration.

package store_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// keySeeds are keys, namespaces and versions with the characters the
// escaping is about, the limits, and the shapes real callers build.
var keySeeds = []string{
	"", "k", "order-1234", "8e03978e-40d5-43e8-bc93-6894a57f9324",
	":", "::", "%", "%%", "%3A", "%3a", "%25", "%253A", "a:b", "a%3Ab", "a%b",
	"step:charge", "flow:pay%3Ament:k", store.KeyPrefix, store.KeyPrefix + "a:b:c",
	"\x00", "a\x00b", "\xff\xfe", "ключ", "\t \n",
	strings.Repeat("k", store.MaxKeyLen), strings.Repeat("k", store.MaxKeyLen+1),
	strings.Repeat(":", 40), strings.Repeat("%", 40),
}

// FuzzValidateKey: ValidateKey accepts exactly the non-empty keys of at most
// MaxKeyLen bytes without a NUL byte, and rejects the others with an error
// matching ErrInvalidKey, of bounded size.
func FuzzValidateKey(f *testing.F) {
	for _, s := range keySeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, key string) {
		err := store.ValidateKey(key)
		valid := key != "" && len(key) <= store.MaxKeyLen && !strings.Contains(key, "\x00")
		if valid && err != nil {
			t.Fatalf("ValidateKey(%q) = %v; the key is valid", key, err)
		}
		if !valid && !errors.Is(err, store.ErrInvalidKey) {
			t.Fatalf("ValidateKey(%q) = %v; want ErrInvalidKey", key, err)
		}
		// A key over the limit is not quoted; a shorter one is, at most 4
		// bytes (\xff) for each of its bytes: however long the input, the
		// error stays small.
		if err != nil && len(err.Error()) > 4*store.MaxKeyLen+100 {
			t.Fatalf("ValidateKey: error of %d bytes quotes too much of the key", len(err.Error()))
		}
	})
}

// FuzzBuildParseKey: for every key and scope, ParseKey(BuildKey(...)) gives
// them back; the scope's segments hold no raw ':'; the built key is what
// EscapeSegment says; and it is valid exactly when nothing holds a NUL
// byte and it fits in MaxKeyLen.
func FuzzBuildParseKey(f *testing.F) {
	for i, s := range keySeeds {
		f.Add(s, keySeeds[(i+1)%len(keySeeds)], keySeeds[(i+7)%len(keySeeds)])
	}
	f.Add("b:c", "a", "")
	f.Add("c", "a:b", "")
	f.Add("1", "tenant:%3A", "v1:2")
	f.Fuzz(func(t *testing.T, key, ns, ver string) {
		sc := store.Scope{Namespace: ns, Version: ver}
		built := store.BuildKey(key, sc)
		want := store.KeyPrefix + store.EscapeSegment(ns) + ":" + store.EscapeSegment(ver) + ":" + key
		if built != want {
			t.Fatalf("BuildKey(%q, %+v) = %q, want %q", key, sc, built, want)
		}
		k, s, ok := store.ParseKey(built)
		if !ok || k != key || s != sc {
			t.Fatalf("ParseKey(BuildKey(%q, %+v)) = %q, %+v, %v", key, sc, k, s, ok)
		}
		if strings.Contains(store.EscapeSegment(ns)+store.EscapeSegment(ver), ":") {
			t.Fatalf("BuildKey(%q, %+v) = %q: a scope segment holds a raw ':'", key, sc, built)
		}
		valid := len(built) <= store.MaxKeyLen && !strings.Contains(key+ns+ver, "\x00")
		if err := store.ValidateKey(built); (err == nil) != valid {
			t.Fatalf("ValidateKey(%q) = %v, want valid=%v", built, err, valid)
		}
	})
}

// FuzzParseKey: ParseKey of any string either reports false or gives the
// one key and scope that BuildKey turns back into that very string (so no
// two strings parse to the same pair).
func FuzzParseKey(f *testing.F) {
	for _, s := range keySeeds {
		f.Add(s)
		f.Add(store.KeyPrefix + s)
		f.Add(store.KeyPrefix + s + ":" + s + ":" + s)
	}
	f.Add(store.KeyPrefix + "a%3Ab:v1:order:1")
	f.Add(store.KeyPrefix + "a%3ab:v1:k") // lower-case escape: not BuildKey's
	f.Add(store.KeyPrefix + "a%2:v:k")    // truncated escape
	f.Add(store.KeyPrefix + "a%")
	f.Add(store.KeyPrefix + "%41:v:k") // an escape BuildKey never writes
	f.Fuzz(func(t *testing.T, s string) {
		k, sc, ok := store.ParseKey(s)
		if !ok {
			if k != "" || sc != (store.Scope{}) {
				t.Fatalf("ParseKey(%q) = %q, %+v, false: want zero values", s, k, sc)
			}
			return
		}
		if back := store.BuildKey(k, sc); back != s {
			t.Fatalf("ParseKey(%q) = %q, %+v, but BuildKey gives %q", s, k, sc, back)
		}
	})
}

// FuzzBuildKeyInjective: two different (key, scope) pairs never build the
// same string. Random pairs rarely collide, so besides the second fuzzed
// pair the target tries the pairs a naive join would confuse with the
// first: every split of ns+":"+ver+":"+key at its colons, and the same
// segments with their escapes undone.
func FuzzBuildKeyInjective(f *testing.F) {
	f.Add("b:c", "a", "", "c", "a:b", "")
	f.Add("k", "a%3Ab", "v", "k", "a:b", "v")
	f.Add("k", "a%253A", "v", "k", "a%3A", "v")
	f.Add("v:k", "n", "", "k", "n", "v")
	f.Add("k", "", "", "", "", "k")
	f.Add("x", "%", "%", "x", "%25", "%25")
	f.Fuzz(func(t *testing.T, k1, ns1, v1, k2, ns2, v2 string) {
		a := pair{k1, store.Scope{Namespace: ns1, Version: v1}}
		built := store.BuildKey(a.key, a.scope)
		check := func(b pair) {
			if b != a && store.BuildKey(b.key, b.scope) == built {
				t.Fatalf("BuildKey(%q, %+v) == BuildKey(%q, %+v) == %q", a.key, a.scope, b.key, b.scope, built)
			}
		}
		check(pair{k2, store.Scope{Namespace: ns2, Version: v2}})
		joined := ns1 + ":" + v1 + ":" + k1
		for _, j := range []string{joined, strings.NewReplacer("%3A", ":", "%25", "%").Replace(joined)} {
			cols := colons(j)
			for x := range cols {
				for y := x + 1; y < len(cols); y++ {
					i, l := cols[x], cols[y]
					check(pair{j[l+1:], store.Scope{Namespace: j[:i], Version: j[i+1 : l]}})
				}
			}
		}
	})
}

type pair struct {
	key   string
	scope store.Scope
}

// colons returns the index of each ':' in s (the first 16: enough to try
// every split of short inputs without making long ones quadratic).
func colons(s string) []int {
	var at []int
	for i := 0; i < len(s) && len(at) < 16; i++ {
		if s[i] == ':' {
			at = append(at, i)
		}
	}
	return at
}

// FuzzEscapeSegment: an escaped segment holds no ':' (so it never runs into
// the next part of a composed key), changes nothing in a string without '%'
// or ':', and unescapes back to the input (through ParseKey, the only
// unescaper). Two different segments never escape to the same string.
func FuzzEscapeSegment(f *testing.F) {
	for i, s := range keySeeds {
		f.Add(s, keySeeds[(i+3)%len(keySeeds)])
	}
	f.Add(":", "%3A")
	f.Add("%3A", "%253A")
	f.Fuzz(func(t *testing.T, s, other string) {
		e := store.EscapeSegment(s)
		if strings.Contains(e, ":") {
			t.Fatalf("EscapeSegment(%q) = %q holds a ':'", s, e)
		}
		if !strings.ContainsAny(s, "%:") && e != s {
			t.Fatalf("EscapeSegment(%q) = %q, want it unchanged", s, e)
		}
		if want := len(s) + 2*strings.Count(s, "%") + 2*strings.Count(s, ":"); len(e) != want {
			t.Fatalf("EscapeSegment(%q) = %q: %d bytes, want %d", s, e, len(e), want)
		}
		_, sc, ok := store.ParseKey(store.KeyPrefix + e + "::k")
		if !ok || sc.Namespace != s {
			t.Fatalf("EscapeSegment(%q) = %q unescapes to %q, %v", s, e, sc.Namespace, ok)
		}
		if s != other && store.EscapeSegment(other) == e {
			t.Fatalf("EscapeSegment(%q) == EscapeSegment(%q) == %q", s, other, e)
		}
		// The way cqrs and flows compose keys, an escaped part, ':', the
		// rest: the first ':' is always the separator.
		if head, rest, _ := strings.Cut(e+":"+other, ":"); head != e || rest != other {
			t.Fatalf("%q + %q splits as %q, %q", s, other, head, rest)
		}
	})
}

// FuzzCheckDuration: CheckDuration accepts exactly (0, MaxDuration] and
// names what it checked in its ErrInvalidArgument.
func FuzzCheckDuration(f *testing.F) {
	for _, d := range []time.Duration{0, 1, -1, time.Millisecond, time.Hour, store.MaxDuration,
		store.MaxDuration + 1, -store.MaxDuration, 1<<63 - 1, -1 << 63} {
		f.Add(int64(d))
	}
	f.Fuzz(func(t *testing.T, n int64) {
		d := time.Duration(n)
		err := store.CheckDuration("lease", d)
		if ok := d > 0 && d <= store.MaxDuration; ok != (err == nil) {
			t.Fatalf("CheckDuration(%v) = %v", d, err)
		}
		if err != nil && (!errors.Is(err, store.ErrInvalidArgument) || !strings.Contains(err.Error(), "lease")) {
			t.Fatalf("CheckDuration(%v) = %v; want ErrInvalidArgument naming the lease", d, err)
		}
	})
}
