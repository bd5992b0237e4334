package main

import (
	"strings"
	"testing"
)

// A DSN or URL that does not parse is named in the usage error without its
// password.
func TestBadURLHidesPassword(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-redis", "redis://admin:s3cret@127.0.0.1:6379/notadb"},
		{"-redis", "redis://admin:s3cret@127.0.0.1:bad/0"},
		{"-redis", "rediss://:s3cret@127.0.0.1:6379/notadb"},
		{"-cluster", "redis://admin:s3cret@127.0.0.1:6379?dial_timeout=zz"},
		{"-postgres", "postgres://admin:s3cret@127.0.0.1:bad/db"},
		{"-postgres", "host=127.0.0.1 port=bad password=s3cret"},
	} {
		r := idem(t, append(args, "stats")...).want(t, exitUsage)
		if strings.Contains(r.err+r.out, "s3cret") {
			t.Errorf("%q: the error shows the password: %s", args, r.err)
		}
	}
}
