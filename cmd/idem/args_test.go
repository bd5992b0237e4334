package main

import (
	"net"
	"strings"
	"testing"
	"time"
)

// Bad command lines are exit code 2, before any connection is tried.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command"},
		{[]string{"drop"}, `unknown command "drop"`},
		{[]string{"get"}, "get takes one KEY"},
		{[]string{"state", "a", "b"}, "state takes one KEY"},
		{[]string{"stats", "a"}, "stats takes no arguments"},
		{[]string{"clear"}, "pass -dry-run"},
		{[]string{"clear", "-dry-run", "-yes"}, "pass -dry-run"},
		{[]string{"get", "-yes", "k"}, "-dry-run and -yes apply to clear only"},
		{[]string{"get", "-key-prefix", "a", "k"}, "apply to clear and stats only"},
		{[]string{"stats", "-redis-key"}, "-redis-key applies to get, state and forget only"},
		{[]string{"state", "-redis-key", "-namespace", "a", "k"}, "takes no -namespace"},
		{[]string{"stats", "-all-versions"}, "-all-versions needs -namespace"},
		{[]string{"stats", "-namespace", "a", "-version", "v", "-all-versions"}, "-all-versions needs -namespace"},
		{[]string{"-redis", "redis://a:1", "-cluster", "b:1", "stats"}, "-redis and -cluster are both set"},
		{[]string{"-timeout", "0s", "stats"}, "-timeout 0s must be positive"},
		{[]string{"-page", "0", "stats"}, "-page 0 must be positive"},
		{[]string{"-nope", "stats"}, "flag provided but not defined: -nope"},
		{[]string{"-redis", "http://x", "stats"}, `-redis "http://x"`},
		{[]string{"-cluster", " , ", "stats"}, "names no node"},
		{[]string{"get", "a\x00b"}, "NUL"},
	} {
		r := idem(t, tc.args...)
		if r.code != exitUsage || !strings.Contains(r.err, tc.want) || !strings.Contains(r.err, "idem -h") {
			t.Errorf("%q: exit %d, stderr %q; want 2 and %q", tc.args, r.code, r.err, tc.want)
		}
	}
}

// Flags go before or after the command, and -- ends them.
func TestParseArgs(t *testing.T) {
	cfg, err := parseArgs([]string{"-json", "get", "-namespace", "n", "k", "-version", "v"})
	if err != nil || !cfg.json || cfg.cmd != "get" || cfg.args[0] != "k" || !cfg.scoped || cfg.namespace != "n" || cfg.version != "v" {
		t.Fatalf("parseArgs: %+v, %v", cfg, err)
	}
	cfg, err = parseArgs([]string{"get", "--", "-k"})
	if err != nil || len(cfg.args) != 1 || cfg.args[0] != "-k" || cfg.scoped {
		t.Fatalf("parseArgs with --: %+v, %v", cfg, err)
	}
	for args, want := range map[string]string{
		"stats":                            "",
		"stats -key-prefix x":              "x",
		"stats -namespace a:b -version v1": "ff:idemp:a%3Ab:v1:",
		"stats -namespace a -version v1 -key-prefix o-": "ff:idemp:a:v1:o-",
		"stats -namespace a -all-versions":              "ff:idemp:a:",
		"stats -version v1":                             "ff:idemp::v1:",
	} {
		cfg, err := parseArgs(strings.Fields(args))
		if err != nil || cfg.scopePrefix() != want {
			t.Errorf("%s: scope prefix %q (%v), want %q", args, cfg.scopePrefix(), err, want)
		}
	}
}

// An unreachable server is exit code 1, with a message that names its
// address, within the timeout.
func TestUnreachable(t *testing.T) {
	t.Parallel()
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := closed.Addr().String()
	closed.Close()
	// A server that accepts connections and never answers.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	accepted := make(chan struct{})
	go func() {
		defer close(accepted)
		var conns []net.Conn
		for {
			c, err := silent.Accept()
			if err != nil {
				for _, c := range conns {
					c.Close()
				}
				return
			}
			conns = append(conns, c)
		}
	}()
	defer func() { silent.Close(); <-accepted }()

	for _, tc := range []struct {
		args []string
		addr string
	}{
		{[]string{"-redis", "redis://" + refused, "state", "k"}, refused},
		{[]string{"-cluster", refused, "stats"}, refused},
		{[]string{"-cluster", "redis://" + refused + "?addr=" + refused, "clear", "-dry-run"}, refused},
		{[]string{"-redis", "redis://" + silent.Addr().String(), "-timeout", "300ms", "get", "k"}, silent.Addr().String()},
	} {
		start := time.Now()
		r := idem(t, tc.args...)
		took := time.Since(start)
		if r.code != exitFailed || !strings.Contains(r.err, "cannot reach Redis at") || !strings.Contains(r.err, tc.addr) {
			t.Errorf("%q: exit %d, stderr %q; want 1 naming %s", tc.args, r.code, r.err, tc.addr)
		}
		if took > 3*time.Second {
			t.Errorf("%q took %v, beyond its timeout", tc.args, took)
		}
	}
}
