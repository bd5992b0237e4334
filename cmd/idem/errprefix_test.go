package main

import (
	"strings"
	"testing"
)

// Every error names idem once, and a -after that decodes but that the
// store refuses is a bad -after: usage (2), as the docs say.
func TestErrorsNameIdemOnce(t *testing.T) {
	t.Parallel()
	f := single(t)
	// {"c":"xyz","b":"YQ=="}: a well-formed cursor whose scan cursor is
	// not the store's.
	const foreignCursor = "eyJjIjoieHl6IiwiYiI6IllRPT0ifQ"
	for _, tc := range []struct {
		args []string
		code int
	}{
		{[]string{"state", strings.Repeat("a", 2000)}, exitUsage},
		{[]string{"state", ""}, exitUsage},
		{[]string{"list", "-after", foreignCursor}, exitUsage},
	} {
		r := f.idem(tc.args...)
		if r.code != tc.code || strings.Count(r.err, "idem:") != 1 {
			t.Errorf("%.40q: exit %d (want %d), stderr %q", tc.args, r.code, tc.code, r.err)
		}
	}
}
