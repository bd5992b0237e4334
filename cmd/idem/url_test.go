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

// A password given in a host:port flag (user:password@host:port, without a
// scheme) is not a host:port: the command refuses it without echoing it,
// rather than dialing it and naming it in the error.
func TestHostPortWithPassword(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"-redis", "admin:s3cret@127.0.0.1:1"},
		{"-cluster", "admin:s3cret@127.0.0.1:1,127.0.0.1:2"},
	} {
		r := idem(t, append(args, "-timeout", "1s", "stats")...)
		if strings.Contains(r.err+r.out, "s3cret") {
			t.Errorf("%q: exit %d, the error shows the password: %s", args, r.code, r.err)
		}
		r.want(t, exitUsage)
	}
}

// An IPv6 address is [host]:port; without its brackets it is refused.
func TestHostPortIPv6(t *testing.T) {
	t.Parallel()
	r := idem(t, "-redis", "[::1]:1", "-timeout", "1s", "stats").want(t, exitFailed)
	if !strings.Contains(r.err, "cannot reach Redis at [::1]:1") {
		t.Errorf("-redis [::1]:1: %s", r.err)
	}
	idem(t, "-redis", "::1", "stats").want(t, exitUsage)
}

// An empty -postgres or -cluster (an unset variable: -postgres "$DSN") is
// a usage error, not the default Redis at 127.0.0.1:6379 reached instead
// of the store the operator named.
func TestEmptyStoreFlag(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"-postgres", ""}, {"-cluster", ""}, {"-cluster", " , "}, {"-redis", ""}} {
		r := idem(t, append(args, "-timeout", "1s", "stats")...)
		if r.code != exitUsage || strings.Contains(r.err, "127.0.0.1:6379") {
			t.Errorf("%q: exit %d, want %d: %s", args, r.code, exitUsage, r.err)
		}
	}
}
