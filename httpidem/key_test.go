package httpidem_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/idemrt/idem/httpidem"
)

func TestParseKey(t *testing.T) {
	long := strings.Repeat("k", httpidem.MaxKeyLen)
	good := map[string]string{
		`abc`:                                    "abc",
		`  abc	`:                                 "abc",
		`"abc"`:                                  "abc",
		` "a b c" `:                              "a b c",
		`"a\"b\\c"`:                              `a"b\c`,
		`8e03978e-40d5-43e8-bc93-6894a57f9324`:   "8e03978e-40d5-43e8-bc93-6894a57f9324",
		`"8e03978e-40d5-43e8-bc93-6894a57f9324"`: "8e03978e-40d5-43e8-bc93-6894a57f9324",
		`a:b/c%d?e=f;g~!`:                        "a:b/c%d?e=f;g~!",
		long:                                     long,
		`"` + long + `"`:                         long,
		`"` + strings.Repeat(`\"`, httpidem.MaxKeyLen) + `"`: strings.Repeat(`"`, httpidem.MaxKeyLen),
	}
	for in, want := range good {
		got, err := httpidem.ParseKey(in)
		if err != nil || got != want {
			t.Errorf("ParseKey(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	bad := map[string]string{
		``:                "empty",
		`   `:             "empty",
		`""`:              "empty",
		`"abc`:            "no closing quote",
		`"abc\`:           "backslash",
		`"a\nb"`:          "backslash",
		`"a"b`:            "after the closing quote",
		`"a";p=1`:         "after the closing quote",
		`a b`:             "visible ASCII",
		"a\tb":            "visible ASCII",
		"a\x00b":          "visible ASCII",
		"\"a\x00b\"":      "printable ASCII",
		"\"a\x7fb\"":      "printable ASCII",
		`ключ`:            "visible ASCII",
		`"ключ"`:          "printable ASCII",
		`a,b`:             "comma",
		`a"b`:             "quoted form",
		`a\b`:             "quoted form",
		long + "k":        "256 bytes",
		`"` + long + `k"`: "limit",
		`"` + long + strings.Repeat("k", 1000) + `"`: "limit",
	}
	for in, reason := range bad {
		_, err := httpidem.ParseKey(in)
		if !errors.Is(err, httpidem.ErrMalformedKey) || !strings.Contains(err.Error(), reason) {
			t.Errorf("ParseKey(%q) = %v; want ErrMalformedKey saying %q", in, err, reason)
		}
		if err != nil && len(err.Error()) > 200 {
			t.Errorf("ParseKey(%q): error of %d bytes", in, len(err.Error()))
		}
	}
}

func FuzzParseKey(f *testing.F) {
	for _, s := range []string{`abc`, `"abc"`, `"a\"b"`, `""`, `a,b`, "\"\xff\""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		k, err := httpidem.ParseKey(in)
		if err != nil {
			if !errors.Is(err, httpidem.ErrMalformedKey) {
				t.Fatalf("error %v is not ErrMalformedKey", err)
			}
			return
		}
		if k == "" || len(k) > httpidem.MaxKeyLen {
			t.Fatalf("ParseKey(%q) = %q", in, k)
		}
		for i := 0; i < len(k); i++ {
			if k[i] < 0x20 || k[i] > 0x7e {
				t.Fatalf("ParseKey(%q) = %q holds byte %#x", in, k, k[i])
			}
		}
	})
}
