package actors

// White-box tests of InFlight's answer (onProbe): what a shard knows of a
// key it has callers of in flight.

import (
	"bytes"
	"testing"
	"time"
)

func (h *harness) probe(key string) (inFlight, bool) {
	h.t.Helper()
	m := &probe{key: key, reply: make(chan probeReply, 1)}
	h.s.onProbe(m)
	r := <-m.reply
	return r.in, r.ok
}

func TestProbe(t *testing.T) {
	h := newHarness(t)
	if _, ok := h.probe("k"); ok {
		t.Fatal("a key without an entry is in flight")
	}
	r := h.ask("k", fp("a"), lease(30*time.Second))
	// The claim is out: the claiming caller's fingerprint and lease.
	if in, ok := h.probe("k"); !ok || !bytes.Equal(in.fingerprint, []byte("a")) || in.leaseLeft != 30*time.Second {
		t.Fatalf("claiming: %+v %v", in, ok)
	}
	h.grant(r)
	h.advance(10 * time.Second)
	in, ok := h.probe("k")
	if !ok || !bytes.Equal(in.fingerprint, []byte("a")) || in.leaseLeft != 20*time.Second {
		t.Fatalf("running: %+v %v", in, ok)
	}
	in.fingerprint[0] = 'x' // the caller's copy
	if e := h.entry("k"); !bytes.Equal(e.fp, []byte("a")) {
		t.Fatalf("the entry's fingerprint changed with the caller's copy: %q", e.fp)
	}
}
