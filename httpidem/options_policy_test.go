package httpidem_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store/memstore"
)

// The middleware's policy: Options, else the runtime's, else the built-in
// defaults, but for the settle time, whose default is the middleware's own
// (10s).

func TestPolicyTTLAndLeaseResolve(t *testing.T) {
	for _, c := range []struct {
		name       string
		runtime    idem.Policy
		opts       idem.Policy
		ttl, lease time.Duration
	}{
		{"built-in", idem.Policy{}, idem.Policy{}, 24 * time.Hour, 60 * time.Second},
		{"runtime's", idem.Policy{TTL: 2 * time.Hour, Lease: 2 * time.Minute}, idem.Policy{}, 2 * time.Hour, 2 * time.Minute},
		{"middleware's", idem.Policy{TTL: 2 * time.Hour, Lease: 2 * time.Minute}, idem.Policy{TTL: time.Hour, Lease: 30 * time.Second}, time.Hour, 30 * time.Second},
	} {
		clk := idemtest.FakeClock()
		rt := idemtest.Runtime(t, idem.Options{Clock: clk, Store: memstore.New(memstore.Options{Clock: clk}), Policy: c.runtime})
		p := newPayments()
		srv, mw := serve(t, httpidem.Options{Runtime: rt, Policy: c.opts, SharedScope: true}, p)
		release := p.Hold()
		owner := make(chan reply, 1)
		go func() { owner <- do(srv, http.MethodPost, "/payments", "k", "pay") }()
		p.WaitStarted(t)
		st, err := mw.State(bg, "k", "")
		if err != nil || st.Status != idem.KeyInProgress || st.LeaseLeft != c.lease {
			t.Errorf("%s: running: %+v %v; want a lease of %v", c.name, st, err, c.lease)
		}
		release()
		expect(t, c.name, <-owner, http.StatusCreated, false, "")
		st, err = mw.State(bg, "k", "")
		if err != nil || st.ExpiresAt.Sub(st.CreatedAt) != c.ttl {
			t.Errorf("%s: kept for %v (%v), want %v", c.name, st.ExpiresAt.Sub(st.CreatedAt), err, c.ttl)
		}
	}
}

// A duplicate waits the middleware's 10s by default, whatever the
// runtime's settle time; Options' settle time replaces it.
func TestPolicySettleResolves(t *testing.T) {
	for _, c := range []struct {
		name     string
		opts     idem.Policy
		conflict bool // after 10s
	}{
		{"middleware's default", idem.Policy{}, true},
		{"Options", idem.Policy{Settle: 11 * time.Second}, false},
	} {
		clk := idemtest.FakeClock()
		rt := idemtest.Runtime(t, idem.Options{Clock: clk, Store: memstore.New(memstore.Options{Clock: clk}),
			Policy: idem.Policy{Settle: time.Hour}})
		p := newPayments()
		srv, _ := serve(t, httpidem.Options{Runtime: rt, Policy: c.opts, SharedScope: true}, p)
		release := p.Hold()
		owner := make(chan reply, 1)
		go func() { owner <- do(srv, http.MethodPost, "/payments", "k", "pay") }()
		p.WaitStarted(t)
		dup := make(chan reply, 1)
		go func() { dup <- do(srv, http.MethodPost, "/payments", "k", "pay") }()
		idemtest.Eventually(t, "the duplicate parked", func() bool { return rt.Stats().Waiters == 1 })
		clk.Advance(10 * time.Second)
		if c.conflict {
			expectProblem(t, c.name+": the duplicate at 10s", idemtest.Recv(t, dup), http.StatusConflict)
			release()
			expect(t, c.name+": owner", <-owner, http.StatusCreated, false, "")
			continue
		}
		release()
		first := <-owner
		expect(t, c.name+": owner", first, http.StatusCreated, false, "")
		expect(t, c.name+": the duplicate", idemtest.Recv(t, dup), http.StatusCreated, true, first.body)
	}
}

func TestPolicyRefused(t *testing.T) {
	for _, c := range []struct {
		p    idem.Policy
		want string
	}{
		{idem.Policy{Classifier: func(error) bool { return true }}, "httpidem: Options.Classifier is set"},
		{idem.Policy{FailFast: true, Settle: time.Second}, "httpidem: Options.FailFast is set, and so is Settle (1s)"},
		{idem.Policy{TTL: -time.Second}, "httpidem: Options.TTL is -1s"},
	} {
		mw, err := httpidem.New(httpidem.Options{Policy: c.p})
		if !errors.Is(err, idem.ErrInvalidArgument) || mw != nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New: %v, want ErrInvalidArgument saying %q", err, c.want)
		}
	}
}
