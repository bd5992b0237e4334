// Running them: plain `go test ./httpidem/` (what `make test` runs) runs
// each target's f.Add seeds and the files under testdata/fuzz/<Target>/. To
// fuzz one target for longer, one target at a time:
//
//	go test -run '^$' -fuzz '^FuzzIdempotencyKeyHeader$' -fuzztime 10m -parallel 1 -fuzzminimizetime 2s ./httpidem/
//
// A failing input is written to testdata/fuzz/<Target>/: fix the bug, and
// commit the file as a permanent seed. -fuzzminimizetime keeps the engine
// from spending a minute minimising each new input (it fuzzes nothing
// meanwhile, showing "0/sec"). A bare "context deadline exceeded" at the
// end of -fuzztime with no input written is a race in Go's fuzz
// coordinator, not a finding; -fuzztime 1000000x (a count) avoids it.
//
// Fuzz target for ParseKey, the parser of the Idempotency-Key header,
// whose input is whatever a client sends: FuzzIdempotencyKeyHeader.
// (FuzzParseKey in key_test.go is the older, smaller target.)

package httpidem_test

import (
	"errors"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/store"
)

// The grammar ParseKey documents, written independently of it. Quoted: an
// RFC 8941 sf-string (DQUOTE *(unescaped / "\" (DQUOTE / "\")) DQUOTE,
// unescaped = %x20-21 / %x23-5B / %x5D-7E) with no parameters. Bare:
// visible ASCII except '"', '\' and ','.
var (
	sfString = regexp.MustCompile(`^"(?:[\x20\x21\x23-\x5b\x5d-\x7e]|\\["\\])*"$`)
	bareKey  = regexp.MustCompile(`^[\x21\x23-\x2b\x2d-\x5b\x5d-\x7e]+$`)
	sfEscape = strings.NewReplacer(`\`, `\\`, `"`, `\"`)
)

// quote serialises key as an RFC 8941 sf-string.
func quote(key string) string { return `"` + sfEscape.Replace(key) + `"` }

// reasons are the rules ParseKey's errors name, one of which every error
// says.
var reasons = []string{"empty", "allowed only in the quoted form", "a comma", "not visible ASCII",
	"-byte limit", "a backslash must escape", "after the closing quote", "not printable ASCII", "no closing quote"}

// FuzzIdempotencyKeyHeader: ParseKey accepts exactly the values the
// documented grammar allows (after trimming spaces and tabs) whose key is 1
// to MaxKeyLen bytes, and then:
//   - the key is the sf-string's content unescaped (quoted) or the value
//     itself (bare), and is a valid store key, also once scoped with
//     store.BuildKey, which ParseKey-s back to it;
//   - re-serialised as a quoted sf-string it parses back to the same key,
//     and that serialisation is the input itself when the input was quoted
//     (one canonical form); a key that can be sent bare parses bare too.
//
// It rejects everything else with an error matching ErrMalformedKey that
// quotes at most 64 bytes of the value and names the broken rule.
func FuzzIdempotencyKeyHeader(f *testing.F) {
	long := strings.Repeat("k", httpidem.MaxKeyLen)
	for _, s := range []string{
		`8e03978e-40d5-43e8-bc93-6894a57f9324`, `"8e03978e-40d5-43e8-bc93-6894a57f9324"`,
		`abc`, ` "a b c" `, "\t\"x\"\t", `"a\"b\\c"`, `a:b/c%d?e=f;g~!`, `"a,b"`,
		``, `   `, `""`, `"abc`, `"abc\`, `"a\nb"`, `"a"b`, `"a";p=1`, `a b`, "a\tb", "a\x00b",
		"\"a\x00b\"", "\"a\x7fb\"", `ключ`, `"ключ"`, `a,b`, `a"b`, `a\b`, `"\`, `"`, `\`,
		long, long + "k", `"` + long + `"`, `"` + long + `k"`, `"` + strings.Repeat(`\"`, httpidem.MaxKeyLen) + `"`,
		`"` + strings.Repeat(`\\`, httpidem.MaxKeyLen+1) + `"`, "\"a\"\t", "\"a\" x", "\r\nabc",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		key, err := httpidem.ParseKey(in)
		v := strings.Trim(in, " \t")
		quoted := strings.HasPrefix(v, `"`)
		var want string
		var ok bool
		if quoted {
			ok = sfString.MatchString(v)
			if ok {
				want = strings.NewReplacer(`\\`, `\`, `\"`, `"`).Replace(v[1 : len(v)-1])
			}
		} else {
			ok, want = bareKey.MatchString(v), v
		}
		ok = ok && want != "" && len(want) <= httpidem.MaxKeyLen

		if err != nil {
			if ok {
				t.Fatalf("ParseKey(%q) = %v; the grammar accepts it as %q", in, err, want)
			}
			if !errors.Is(err, httpidem.ErrMalformedKey) || key != "" {
				t.Fatalf("ParseKey(%q) = %q, %v; want ErrMalformedKey", in, key, err)
			}
			// "<ErrMalformedKey>: <value, at most 64 bytes, quoted>: <rule>"
			shown := in
			if len(shown) > 64 {
				shown = shown[:64] + "..."
			}
			rule, found := strings.CutPrefix(err.Error(), httpidem.ErrMalformedKey.Error()+": "+strconv.Quote(shown)+": ")
			if !found || !containsAny(rule, reasons) {
				t.Fatalf("ParseKey(%q): error %q does not quote the value and name a rule", in, err)
			}
			return
		}
		if !ok || key != want {
			t.Fatalf("ParseKey(%q) = %q; the grammar says %q, accepted=%v", in, key, want, ok)
		}
		if err := store.ValidateKey(key); err != nil {
			t.Fatalf("ParseKey(%q) = %q, not a store key: %v", in, key, err)
		}
		scope := store.Scope{Namespace: "tenant:a", Version: "v1"}
		scoped := store.BuildKey(key, scope)
		if err := store.ValidateKey(scoped); err != nil {
			t.Fatalf("scoped key %q: %v", scoped, err)
		}
		if k, sc, ok := store.ParseKey(scoped); !ok || k != key || sc != scope {
			t.Fatalf("store.ParseKey(%q) = %q, %+v, %v", scoped, k, sc, ok)
		}
		q := quote(key)
		if back, err := httpidem.ParseKey(q); err != nil || back != key {
			t.Fatalf("ParseKey(quote(%q) = %q) = %q, %v", key, q, back, err)
		}
		if quoted && q != v {
			t.Fatalf("ParseKey(%q) = %q, whose sf-string %q is another spelling", in, key, q)
		}
		if bareKey.MatchString(key) {
			if back, err := httpidem.ParseKey(key); err != nil || back != key {
				t.Fatalf("ParseKey(%q) (bare) = %q, %v", key, back, err)
			}
		}
	})
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}
