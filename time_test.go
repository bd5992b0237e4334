package idem_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store"
)

func TestResultTTL(t *testing.T) {
	for _, disable := range []bool{false, true} {
		clk := idemtest.FakeClock()
		rt := idemtest.Runtime(t, idem.Options{Clock: clk, DisableCache: disable})
		if _, err := idem.Do(bg, rt, "k", idemtest.Value("v1"), idem.WithTTL(time.Minute)); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Minute - time.Nanosecond)
		if v, _ := idem.Do(bg, rt, "k", idemtest.MustNotRun(t)); v != "v1" {
			t.Fatalf("just before the TTL: %q", v)
		}
		clk.Advance(time.Nanosecond)
		var out idem.Outcome
		v, err := idem.Do(bg, rt, "k", idemtest.Value("v2"), idem.WithOutcome(&out))
		if err != nil || v != "v2" || out != idem.Executed {
			t.Fatalf("at the TTL (cache disabled=%v): %q %v %v; want a new run", disable, v, err, out)
		}
	}
}

// A key whose owner died (claimed, never finished) is taken over when its
// lease ends, by a caller that waited for it.
func TestTakeoverAfterLease(t *testing.T) {
	clk := idemtest.FakeClock()
	st := memStore(clk)
	rt := idemtest.Runtime(t, idem.Options{Store: st, Clock: clk})
	dead, err := st.Claim(bg, "k", store.ClaimRequest{Owner: "crashed", Lease: 10 * time.Second, TTL: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ch := idemtest.GoDo(bg, rt, "k", idemtest.Value("taken over"), idem.WithSettle(time.Minute))
	waitersAre(t, rt, 1)
	// Step through the re-claim timers until the lease has ended.
	for i := 0; i < 200 && len(ch) == 0; i++ {
		clk.Advance(100 * time.Millisecond)
		time.Sleep(time.Millisecond)
	}
	r := idemtest.Recv(t, ch)
	if r.Err != nil || r.V != "taken over" || r.Out != idem.Executed {
		t.Fatalf("waiter: %+v", r)
	}
	rec, err := st.Get(bg, "k")
	if err != nil || rec.Token.Fence <= dead.Token.Fence {
		t.Fatalf("record %+v, %v: want a higher fence than %d", rec.Token, err, dead.Token.Fence)
	}
	if _, err := st.Complete(bg, "k", dead.Token, store.Record{Value: []byte(`"stale"`)}, time.Hour); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("the dead owner's late Complete: %v", err)
	}
}

// An owner that cannot renew its lease (the store refuses Renew) is taken
// over by another instance after the lease; its own result is then refused
// with ErrLeaseLost and the new owner's stays.
func TestStaleOwnerRefused(t *testing.T) {
	clk := idemtest.FakeClock()
	mem := memStore(clk)
	fs := &faultStore{Store: mem, extendErr: errors.New("connection refused")}
	rtA := idemtest.Runtime(t, idem.Options{Store: fs, Clock: clk, Lease: 10 * time.Second})
	rtB := idemtest.Runtime(t, idem.Options{Store: mem, Clock: clk})
	g := idemtest.NewGate()
	a := idemtest.GoDo(bg, rtA, "k", g.Fn("A", nil))
	<-g.Started
	clk.Advance(11 * time.Second)
	var out idem.Outcome
	v, err := idem.Do(bg, rtB, "k", idemtest.Value("B"), idem.WithOutcome(&out))
	if err != nil || v != "B" || out != idem.Executed {
		t.Fatalf("B after A's lease: %q %v %v", v, err, out)
	}
	close(g.Open)
	if r := idemtest.Recv(t, a); !errors.Is(r.Err, idem.ErrLeaseLost) {
		t.Fatalf("A: %+v, want ErrLeaseLost", r)
	}
	if v, err := idem.Do(bg, rtA, "k", idemtest.MustNotRun(t)); err != nil || v != "B" {
		t.Fatalf("stored result: %q %v, want B's", v, err)
	}
}

// The lease is renewed while the function runs, so a long run keeps its key.
func TestLeaseRenewed(t *testing.T) {
	clk := idemtest.FakeClock()
	mem := memStore(clk)
	rtA := idemtest.Runtime(t, idem.Options{Store: mem, Clock: clk, Lease: 9 * time.Second})
	g := idemtest.NewGate()
	a := idemtest.GoDo(bg, rtA, "k", g.Fn("A", nil))
	<-g.Started
	for range 10 { // 30s: more than three leases
		clk.Advance(3 * time.Second)
		time.Sleep(5 * time.Millisecond)
	}
	res, err := mem.Claim(bg, "k", store.ClaimRequest{Owner: "intruder", Lease: time.Second, TTL: time.Hour})
	if err != nil || res.Status != store.InProgress {
		t.Fatalf("claim by another instance after 30s: %v %v, want in-progress", res.Status, err)
	}
	close(g.Open)
	if r := idemtest.Recv(t, a); r.Err != nil || r.V != "A" {
		t.Fatalf("A: %+v", r)
	}
}

// When a renewal finds the lease lost, fn's context is cancelled with
// ErrLeaseLost as its cause and the result is refused.
func TestLeaseLostCancelsFunction(t *testing.T) {
	clk := idemtest.FakeClock()
	fs := &faultStore{Store: memStore(clk), extendErr: store.ErrLeaseLost}
	rt := idemtest.Runtime(t, idem.Options{Store: fs, Clock: clk, Lease: 9 * time.Second})
	started := make(chan struct{})
	ch := idemtest.GoDo(bg, rt, "k", func(ctx context.Context) (string, error) {
		close(started)
		<-ctx.Done()
		if !errors.Is(context.Cause(ctx), idem.ErrLeaseLost) {
			t.Errorf("cause = %v", context.Cause(ctx))
		}
		return "too late", nil
	})
	<-started
	for i := 0; i < 100 && len(ch) == 0; i++ {
		clk.Advance(3 * time.Second)
		time.Sleep(2 * time.Millisecond)
	}
	if r := idemtest.Recv(t, ch); !errors.Is(r.Err, idem.ErrLeaseLost) {
		t.Fatalf("owner: %+v, want ErrLeaseLost", r)
	}
}
