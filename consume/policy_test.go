package consume_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// The consumer's policy: CallOptions, else Options' Policy, else the
// runtime's, else the built-in defaults, but for the settle time, whose
// default is the consumer's own (5s).

func TestPolicyTTLAndLeaseResolve(t *testing.T) {
	tuned := idem.Policy{TTL: 2 * time.Hour, Lease: 2 * time.Minute}
	for _, c := range []struct {
		name       string
		runtime    idem.Policy
		opts       consume.Options
		ttl, lease time.Duration
	}{
		{"built-in", idem.Policy{}, consume.Options{}, 24 * time.Hour, time.Minute},
		{"runtime's", tuned, consume.Options{}, 2 * time.Hour, 2 * time.Minute},
		{"consumer's", tuned, consume.Options{Policy: idem.Policy{TTL: time.Hour, Lease: 30 * time.Second}}, time.Hour, 30 * time.Second},
		{"CallOptions over the consumer's", tuned, consume.Options{Policy: idem.Policy{TTL: time.Hour, Lease: 30 * time.Second},
			CallOptions: []idem.CallOption{idem.WithTTL(3 * time.Hour)}}, 3 * time.Hour, 30 * time.Second},
	} {
		clk := idemtest.FakeClock()
		cons := newConsumer(t, idem.Options{Clock: clk, Store: memstore.New(memstore.Options{Clock: clk}), Policy: c.runtime}, c.opts)
		g := idemtest.NewGate()
		done := make(chan consume.Verdict, 1)
		go func() {
			_, vd := consume.Handle(context.Background(), cons, delivery("m", 1), g.Fn("v", nil))
			done <- vd
		}()
		idemtest.Recv(t, g.Started)
		key, _ := consume.Key("S/c", "m")
		st, err := cons.Runtime().State(context.Background(), key)
		if err != nil || st.Status != idem.KeyInProgress || st.LeaseLeft != c.lease {
			t.Errorf("%s: running: %+v %v; want a lease of %v", c.name, st, err, c.lease)
		}
		close(g.Open)
		check(t, idemtest.Recv(t, done), consume.Ack, idem.Executed)
		st, err = cons.Runtime().State(context.Background(), key)
		if err != nil || st.ExpiresAt.Sub(st.CreatedAt) != c.ttl {
			t.Errorf("%s: kept for %v (%v), want %v", c.name, st.ExpiresAt.Sub(st.CreatedAt), err, c.ttl)
		}
	}
}

// A duplicate delivery waits the consumer's 5s by default, whatever the
// runtime's settle time; Options' Settle replaces it, and FailFast gives
// the duplicate back at once.
func TestPolicySettleResolves(t *testing.T) {
	for _, c := range []struct {
		name  string
		opts  idem.Policy
		fails bool // at once
		waits bool // past 5s
	}{
		{"consumer's default", idem.Policy{}, false, false},
		{"Options' Settle", idem.Policy{Settle: 6 * time.Second}, false, true},
		{"Options' FailFast", idem.Policy{FailFast: true}, true, false},
	} {
		clk := idemtest.FakeClock()
		cons := newConsumer(t, idem.Options{Clock: clk, Store: memstore.New(memstore.Options{Clock: clk}),
			Policy: idem.Policy{Settle: time.Hour}}, consume.Options{Policy: c.opts})
		g := idemtest.NewGate()
		first := make(chan consume.Verdict, 1)
		go func() {
			_, vd := consume.Handle(context.Background(), cons, delivery("m", 1), g.Fn("v", nil))
			first <- vd
		}()
		idemtest.Recv(t, g.Started)
		var e effect
		dup := make(chan consume.Verdict, 1)
		go func() {
			_, vd := consume.Handle(context.Background(), cons, delivery("m", 1), e.fn("w", nil))
			dup <- vd
		}()
		if !c.fails {
			idemtest.Eventually(t, "the duplicate parked", func() bool { return cons.Runtime().Stats().Waiters == 1 })
			clk.Advance(5 * time.Second)
		}
		if c.waits {
			close(g.Open)
			check(t, idemtest.Recv(t, dup), consume.Ack, idem.Joined)
		} else {
			vd := idemtest.Recv(t, dup)
			check(t, vd, consume.Retry, idem.NoOutcome)
			if !errors.Is(vd.Err, idem.ErrConflict) {
				t.Fatalf("%s: %+v, want a conflict", c.name, vd)
			}
			close(g.Open)
		}
		check(t, idemtest.Recv(t, first), consume.Ack, idem.Executed)
		e.want(t, 0)
	}
}

func TestPolicyRefused(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	for _, c := range []struct {
		p    idem.Policy
		want string
	}{
		{idem.Policy{FailFast: true, Settle: time.Second}, "consume.Options.FailFast is set, and so is Settle (1s)"},
		{idem.Policy{Settle: -time.Second}, "consume.Options.Settle is -1s"},
		{idem.Policy{Lease: store.MaxDuration + 1}, "consume.Options.Lease is"},
	} {
		cons, err := consume.New(consume.Options{Runtime: rt, Policy: c.p})
		if !errors.Is(err, idem.ErrInvalidArgument) || cons != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New: %v, want ErrInvalidArgument saying %q", err, c.want)
		}
	}
}
