package keytext

import (
	"strings"
	"testing"
)

func TestQuote(t *testing.T) {
	for _, c := range []struct{ key, want string }{
		{"order-1", `"order-1"`},
		{strings.Repeat("a", MaxWhole), `"` + strings.Repeat("a", MaxWhole) + `"`},
		{strings.Repeat("a", 1100), `"` + strings.Repeat("a", Head) + `"... (1100 bytes)`},
		// A cut never splits a rune: "é" is two bytes, at 63 and 64.
		{strings.Repeat("a", Head-1) + strings.Repeat("é", 100), `"` + strings.Repeat("a", Head-1) + `"... (263 bytes)`},
	} {
		if got := Quote(c.key); got != c.want {
			t.Errorf("Quote(%d bytes) = %s, want %s", len(c.key), got, c.want)
		}
	}
}

func TestCut(t *testing.T) {
	for _, key := range []string{"k", "with \"quotes\"", strings.Repeat("x", 500)} {
		q := Quote(key)
		got, cut, rest, ok := Cut(q + ": tail")
		if !ok || rest != ": tail" || cut != (len(key) > MaxWhole) || !strings.HasPrefix(key, got) {
			t.Errorf("Cut(%s): %q %v %q %v", q, got, cut, rest, ok)
		}
	}
	if _, _, _, ok := Cut("not quoted"); ok {
		t.Error("Cut of unquoted text succeeded")
	}
}
