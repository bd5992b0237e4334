package idem_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

// The policy: how its layers combine (Inherit), what it refuses
// (Validate), and that a call, the runtime and the built-in defaults
// resolve in that order.

func TestPolicyInherit(t *testing.T) {
	yes := func(error) bool { return true }
	no := func(error) bool { return false }
	below := idem.Policy{Settle: time.Minute, Lease: time.Hour, TTL: 2 * time.Hour, Classifier: yes}
	belowNoClass := below
	belowNoClass.Classifier = nil
	for _, c := range []struct {
		name      string
		p, from   idem.Policy
		want      idem.Policy
		wantClass func(error) bool
	}{
		{"zero takes all", idem.Policy{}, below, belowNoClass, yes},
		{"own fields kept", idem.Policy{Settle: time.Second, Lease: 2 * time.Second, TTL: 3 * time.Second, Classifier: no}, below,
			idem.Policy{Settle: time.Second, Lease: 2 * time.Second, TTL: 3 * time.Second}, no},
		{"FailFast over a settle time", idem.Policy{FailFast: true}, below,
			idem.Policy{FailFast: true, Lease: time.Hour, TTL: 2 * time.Hour}, yes},
		{"a settle time over FailFast", idem.Policy{Settle: time.Second}, idem.Policy{FailFast: true},
			idem.Policy{Settle: time.Second}, nil},
		{"FailFast inherited", idem.Policy{TTL: time.Second}, idem.Policy{FailFast: true},
			idem.Policy{FailFast: true, TTL: time.Second}, nil},
		{"NoRenewal inherited", idem.Policy{}, idem.Policy{NoRenewal: true}, idem.Policy{NoRenewal: true}, nil},
		{"NoRenewal kept", idem.Policy{NoRenewal: true}, idem.Policy{}, idem.Policy{NoRenewal: true}, nil},
	} {
		got := c.p.Inherit(c.from)
		class := got.Classifier
		if got.Settle != c.want.Settle || got.FailFast != c.want.FailFast || got.Lease != c.want.Lease ||
			got.TTL != c.want.TTL || got.NoRenewal != c.want.NoRenewal {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
		}
		if (class == nil) != (c.wantClass == nil) || class != nil && class(nil) != c.wantClass(nil) {
			t.Errorf("%s: the classifier is not the one inherited", c.name)
		}
	}
}

func TestPolicyValidate(t *testing.T) {
	if err := (idem.Policy{Settle: store.MaxDuration, Lease: store.MaxDuration, TTL: store.MaxDuration}).Validate("Options"); err != nil {
		t.Fatalf("the longest durations: %v", err)
	}
	if err := (idem.Policy{FailFast: true, NoRenewal: true}).Validate("Options"); err != nil {
		t.Fatalf("FailFast alone: %v", err)
	}
	for _, c := range []struct {
		p    idem.Policy
		want string
	}{
		{idem.Policy{Settle: -1}, "Options.Settle is -1ns; it must not be negative"},
		{idem.Policy{Lease: -time.Second}, "Options.Lease is -1s"},
		{idem.Policy{TTL: store.MaxDuration + 1}, "Options.TTL is 876000h0m0.000000001s; it must be at most 876000h0m0s"},
		{idem.Policy{FailFast: true, Settle: time.Second}, "Options.FailFast is set, and so is Settle (1s); set one of them"},
	} {
		err := c.p.Validate("Options")
		if !errors.Is(err, idem.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: %v, want ErrInvalidArgument saying %q", c.p, err, c.want)
		}
	}
}

// Bad settle times and policies fail the call, naming what the caller
// wrote; WithSettle(0) points at WithFailFast.
func TestCallPolicyRefused(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	for _, c := range []struct {
		opt  idem.CallOption
		want string
	}{
		{idem.WithSettle(0), "WithSettle(0): a settle time must be positive; to fail at once instead of waiting, use WithFailFast()"},
		{idem.WithSettle(-time.Second), "WithSettle(-1s)"},
		{idem.WithSettle(store.MaxDuration + 1), "must be at most"},
		{idem.WithPolicy(idem.Policy{TTL: -time.Second}), "WithPolicy: Policy.TTL is -1s"},
		{idem.WithPolicy(idem.Policy{FailFast: true, Settle: time.Second}), "WithPolicy: Policy.FailFast is set"},
	} {
		_, err := idem.Do(bg, rt, "k", idemtest.MustNotRun(t), c.opt)
		if !errors.Is(err, idem.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v, want ErrInvalidArgument saying %q", err, c.want)
		}
		if _, err := idem.Get[string](bg, rt, "k", c.opt); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("Get: %v, want ErrInvalidArgument", err)
		}
	}
}

// A call's TTL and lease: the call's, else the runtime's, else the
// built-in defaults (24h, 60s).
func TestPolicyTTLAndLeaseResolve(t *testing.T) {
	clk := idemtest.FakeClock()
	tuned := idemtest.Runtime(t, idem.Options{Clock: clk, Store: memStore(clk), Policy: idem.Policy{TTL: time.Hour, Lease: 2 * time.Minute}})
	plain := idemtest.Runtime(t, idem.Options{Clock: clk, Store: memStore(clk)})
	for _, c := range []struct {
		name       string
		rt         *idem.Runtime
		opts       []idem.CallOption
		ttl, lease time.Duration
	}{
		{"built-in", plain, nil, 24 * time.Hour, time.Minute},
		{"runtime's", tuned, nil, time.Hour, 2 * time.Minute},
		{"call's policy", tuned, []idem.CallOption{idem.WithPolicy(idem.Policy{TTL: 3 * time.Hour, Lease: 30 * time.Second})}, 3 * time.Hour, 30 * time.Second},
		{"call's TTL only", tuned, []idem.CallOption{idem.WithPolicy(idem.Policy{TTL: 3 * time.Hour})}, 3 * time.Hour, 2 * time.Minute},
		{"WithTTL and WithLease", plain, []idem.CallOption{idem.WithTTL(time.Minute), idem.WithLease(time.Second)}, time.Minute, time.Second},
	} {
		key := "k:" + c.name
		g := idemtest.NewGate()
		ch := idemtest.GoDo(bg, c.rt, key, g.Fn("v", nil), c.opts...)
		<-g.Started
		st, err := c.rt.State(bg, key)
		if err != nil || st.Status != idem.KeyInProgress || st.LeaseLeft != c.lease {
			t.Errorf("%s: running: %+v %v; want a lease of %v", c.name, st, err, c.lease)
		}
		close(g.Open)
		idemtest.Recv(t, ch)
		st, err = c.rt.State(bg, key)
		if err != nil || st.ExpiresAt.Sub(st.CreatedAt) != c.ttl {
			t.Errorf("%s: stored for %v (%v), want %v", c.name, st.ExpiresAt.Sub(st.CreatedAt), err, c.ttl)
		}
	}
}

// Fail fast or wait: the call's choice, else the runtime's; a settle time
// and FailFast are one choice, the later option winning.
func TestPolicyFailFastOrSettle(t *testing.T) {
	failFast := idemtest.Runtime(t, idem.Options{Policy: idem.Policy{FailFast: true}})
	waits := idemtest.Runtime(t, idem.Options{})
	for _, c := range []struct {
		name string
		rt   *idem.Runtime
		opts []idem.CallOption
		wait bool
	}{
		{"runtime FailFast", failFast, nil, false},
		{"runtime FailFast, call WithSettle", failFast, []idem.CallOption{idem.WithSettle(time.Hour)}, true},
		{"runtime FailFast, call policy Settle", failFast, []idem.CallOption{idem.WithPolicy(idem.Policy{Settle: time.Hour})}, true},
		{"runtime FailFast, call policy without Settle", failFast, []idem.CallOption{idem.WithPolicy(idem.Policy{TTL: time.Hour})}, false},
		{"runtime waits", waits, nil, true},
		{"runtime waits, call WithFailFast", waits, []idem.CallOption{idem.WithFailFast()}, false},
		{"runtime waits, call policy FailFast", waits, []idem.CallOption{idem.WithPolicy(idem.Policy{FailFast: true})}, false},
		{"WithFailFast then WithSettle", waits, []idem.CallOption{idem.WithFailFast(), idem.WithSettle(time.Hour)}, true},
		{"WithSettle then WithFailFast", waits, []idem.CallOption{idem.WithSettle(time.Hour), idem.WithFailFast()}, false},
	} {
		g := idemtest.NewGate()
		owner := idemtest.GoDo(bg, c.rt, c.name, g.Fn("first", nil))
		<-g.Started
		dup := idemtest.GoDo(bg, c.rt, c.name, idemtest.MustNotRun(t), c.opts...)
		if c.wait {
			waitersAre(t, c.rt, 1)
			close(g.Open)
			if r := idemtest.Recv(t, dup); r.Err != nil || r.V != "first" || r.Out != idem.Joined {
				t.Errorf("%s: %+v; want to wait and join", c.name, r)
			}
		} else {
			r := idemtest.Recv(t, dup)
			var ce *idem.ConflictError
			if !errors.As(r.Err, &ce) || ce.LeaseLeft <= 0 {
				t.Errorf("%s: %+v; want a *ConflictError at once", c.name, r)
			}
			close(g.Open)
		}
		idemtest.Recv(t, owner)
	}
}

// The runtime's NoRenewal makes every call's lease a hard limit, as
// WithoutRenewal does for one.
func TestPolicyNoRenewal(t *testing.T) {
	clk := idemtest.FakeClock()
	rt := idemtest.Runtime(t, idem.Options{Clock: clk, Store: memStore(clk), Policy: idem.Policy{NoRenewal: true, Lease: time.Second}})
	g := idemtest.NewGate()
	hung := idemtest.GoDo(bg, rt, "k", g.Fn("late", nil))
	<-g.Started
	idemtest.Eventually(t, "the end of the lease armed", func() bool { return clk.Timers() == 1 })
	clk.Advance(4 * time.Second)
	v, err := idem.Do(bg, rt, "k", idemtest.Value("taken over"), idem.WithSettle(time.Hour))
	if err != nil || v != "taken over" {
		t.Fatalf("after the lease: %q %v", v, err)
	}
	close(g.Open)
	if r := idemtest.Recv(t, hung); !errors.Is(r.Err, idem.ErrLeaseLost) {
		t.Fatalf("the hung owner's late result: %+v, want ErrLeaseLost", r)
	}
}

// The runtime's classifier applies to calls that set none; a call's
// replaces it.
func TestPolicyClassifier(t *testing.T) {
	errDeclined := errors.New("declined")
	rt := idemtest.Runtime(t, idem.Options{Policy: idem.Policy{Classifier: func(err error) bool { return errors.Is(err, errDeclined) }}})
	fail := func(context.Context) (string, error) { return "", errDeclined }
	if _, err := idem.Do(bg, rt, "runtime's", fail); !idem.IsPermanent(err) {
		t.Fatalf("the runtime's classifier: %v, want permanent", err)
	}
	never := idem.WithPolicy(idem.Policy{Classifier: func(error) bool { return false }})
	if _, err := idem.Do(bg, rt, "call's", fail, never); err == nil || idem.IsPermanent(err) {
		t.Fatalf("the call's classifier: %v, want a transient error", err)
	}
}
