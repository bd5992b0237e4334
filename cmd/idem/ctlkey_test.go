package main

import (
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
)

// A key is data from outside (a Kafka message key, a client's header): a
// key with a terminal escape or a newline is shown quoted, not written to
// the operator's terminal as it is, where it could rewrite the screen or
// forge lines of output.
func TestKeyWithControlCharacters(t *testing.T) {
	t.Parallel()
	f := single(t)
	const key = "order-\x1b[2J\x1b[31mfake\ncompleted     order-x"
	f.done(key, store.Record{Value: []byte("v")}, time.Hour)
	f.claim("held-\x1b[0m", "owner-1", time.Minute, nil)
	for _, args := range [][]string{
		{"list"},
		{"state", key},
		{"forget", "-dry-run", key},
		{"clear", "-dry-run", "-key-prefix", "order-"},
		{"clear", "-dry-run", "-key-prefix", "held-"},
	} {
		r := f.idem(args...).want(t, exitOK)
		if strings.ContainsAny(r.out, "\x1b") || strings.Contains(r.out, "fake\n") {
			t.Errorf("%.20q writes the key as it is:\n%q", args, r.out)
		}
	}
}

// A stored error's message and an owner are from outside too.
func TestErrorWithControlCharacters(t *testing.T) {
	t.Parallel()
	f := single(t)
	f.done("declined", store.Record{Failed: true, Error: "card \x1b[2Jdeclined\nfake line"}, time.Hour)
	f.claim("held", "owner-\x1b[0m", time.Minute, nil)
	for _, args := range [][]string{{"get", "declined"}, {"state", "declined"}, {"list"}, {"state", "held"}} {
		r := f.idem(args...).want(t, map[string]int{"get": exitOK}[args[0]])
		if strings.ContainsAny(r.out, "\x1b") || strings.Contains(r.out, "\nfake line") {
			t.Errorf("%q writes a stored text as it is:\n%q", args, r.out)
		}
	}
}
