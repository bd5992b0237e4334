package redisstore_test

import (
	"errors"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/fence"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/redisstore"
)

// The fence stops at 2^53, the largest number the scripts (Lua doubles)
// and the format hold exactly: a takeover of a record at the limit is
// refused as corrupt, and the record is left as it was; one below it
// takes the key with fence 2^53.
func TestFenceAtItsLimit(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	s := newStore(t, c)
	const limit = 1 << 53
	for _, state := range []string{"r", "p"} {
		key := "at-limit-" + state
		v := fmt.Sprintf("3%s0%d:1:o3600000:0:", state, uint64(limit)) // ms = PTTL: a lease already over
		if err := c.Set(bg, s.RecordKey(key), v, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		r, err := s.Claim(bg, key, claimReq("B"))
		var ce *redisstore.CorruptError
		if !errors.As(err, &ce) {
			t.Errorf("%s: claim of a record with fence 2^53 = %+v, %v; want a *CorruptError", key, r, err)
		}
		if got, _ := c.Get(bg, s.RecordKey(key)).Result(); got != v {
			t.Errorf("%s: the refused claim changed the record to %q", key, got)
		}
	}
	if err := c.Set(bg, s.RecordKey("below"), fmt.Sprintf("3r0%d:1:o0:0:", uint64(limit-1)), time.Hour).Err(); err != nil {
		t.Fatal(err)
	}
	r, err := s.Claim(bg, "below", claimReq("B"))
	if err != nil || r.Status != store.Claimed || r.Token.Fence != limit {
		t.Errorf("claim of a record with fence 2^53 − 1 = %+v, %v; want fence 2^53", r, err)
	}
}

// A claim takes its fence floor from the server's clock when the claim
// script runs: a new record's fence is fence.Floor of a moment between the
// call and its reply (the server runs on this machine's clock), and a claim
// of a record that is still there (released, or a holder whose lease
// ended) raises its fence to that floor, or by one where the record's
// fence is already above it: a small counter of a record written before
// fences came from a clock, and a fence from a client whose clock ran an
// hour ahead (what a version that took the floor from the client's clock
// could leave), each in the layout that version wrote.
func TestClaimFloorIsServerTime(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	s := newStore(t, c)
	before := fence.Floor(time.Now())
	r, err := s.Claim(bg, "new", claimReq("A"))
	after := fence.Floor(time.Now())
	if err != nil || r.Status != store.Claimed || r.Token.Fence < before || r.Token.Fence > after {
		t.Fatalf("claim of a new key: %+v, %v; want a fence from %d to %d", r, err, before, after)
	}

	ahead := fence.Floor(time.Now().Add(time.Hour))
	for _, rec := range []struct {
		name, value string
		fence       uint64 // 0: the floor at the claim
	}{
		{"released-counter", "3r07:1:o0:0:", 0},
		{"abandoned-counter", "3p07:1:o3600000:0:", 0}, // ms = PTTL: the lease is over
		{"released-ahead", fmt.Sprintf("4r0%d:1:o1:0:0:", ahead), ahead + 1},
		{"abandoned-ahead", fmt.Sprintf("4p0%d:1:o1:3600000:0:", ahead), ahead + 1},
	} {
		if err := c.Set(bg, s.RecordKey(rec.name), rec.value, time.Hour).Err(); err != nil {
			t.Fatal(err)
		}
		before := fence.Floor(time.Now())
		r, err := s.Claim(bg, rec.name, claimReq("B"))
		after := fence.Floor(time.Now())
		lo, hi := before, after
		if rec.fence != 0 {
			lo, hi = rec.fence, rec.fence
		}
		if err != nil || r.Status != store.Claimed || r.Token.Fence < lo || r.Token.Fence > hi {
			t.Errorf("%s: claim of %q = %+v, %v; want a fence from %d to %d", rec.name, rec.value, r, err, lo, hi)
		}
	}
}

// holdingProxy is a TCP proxy to a Redis that can hold what clients send:
// while held, bytes from a client wait in the proxy, and go on to the
// server, in order, at the release.
type holdingProxy struct {
	ln      net.Listener
	gate    sync.RWMutex  // write-locked while held
	waiting chan struct{} // gets a token when bytes wait at the gate
}

func newHoldingProxy(t *testing.T, target string) *holdingProxy {
	p := &holdingProxy{waiting: make(chan struct{}, 1)}
	p.ln = proxy(t, target, func(c, u net.Conn) {
		go p.pipe(u, c, true)
		go p.pipe(c, u, false)
	})
	return p
}

func (p *holdingProxy) pipe(dst, src net.Conn, held bool) {
	defer dst.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if held && !p.gate.TryRLock() {
				select {
				case p.waiting <- struct{}{}:
				default:
				}
				p.gate.RLock()
			}
			_, werr := dst.Write(buf[:n])
			if held {
				p.gate.RUnlock()
			}
			if werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *holdingProxy) addr() string { return p.ln.Addr().String() }
func (p *holdingProxy) hold()        { p.gate.Lock() }
func (p *holdingProxy) release()     { p.gate.Unlock() }

// A claim held up on its way to Redis, while another instance claims the
// key, completes it and forgets it, still takes a fence above that
// record's: the floor is the server's clock when the claim runs, not the
// client's when it sent it. (With the floor read when the batch was
// prepared, the held claim created a record with a lower fence: what
// TestLinearizableSingle caught now and then, a claim overtaken on its way
// by another client's claim, completion and Forget.)
func TestHeldClaimFenceAboveForgottenRecord(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	proxy := newHoldingProxy(t, srv.Addr)
	slow := redis.NewClient(&redis.Options{Addr: proxy.addr(), ReadTimeout: 10 * time.Second})
	t.Cleanup(func() { slow.Close() })
	const prefix = "held:"
	a := newStoreWithPrefix(t, slow, prefix)
	b := newStoreWithPrefix(t, newClient(t, srv), prefix)
	if _, err := a.Get(bg, "warm-up"); !errors.Is(err, store.ErrNotFound) { // the connection and the scripts
		t.Fatal(err)
	}

	proxy.hold()
	type result struct {
		r   store.ClaimResult
		err error
	}
	got := make(chan result, 1)
	go func() {
		r, err := a.Claim(bg, "k", claimReq("A"))
		got <- result{r, err}
	}()
	select {
	case <-proxy.waiting:
	case <-time.After(10 * time.Second):
		proxy.release()
		t.Fatal("A's claim never reached the proxy")
	}
	time.Sleep(2 * time.Millisecond) // B's claim a clear while after A's send
	rb, err := b.Claim(bg, "k", claimReq("B"))
	if err != nil || rb.Status != store.Claimed {
		proxy.release()
		t.Fatalf("B's claim: %+v, %v", rb, err)
	}
	if _, err := b.Complete(bg, "k", rb.Token, store.Record{Value: []byte(`"b"`)}, time.Hour); err != nil {
		proxy.release()
		t.Fatal(err)
	}
	if err := b.Forget(bg, "k"); err != nil {
		proxy.release()
		t.Fatal(err)
	}
	proxy.release()
	ra := <-got
	if ra.err != nil || ra.r.Status != store.Claimed || ra.r.Takeover || ra.r.Attempt != 1 {
		t.Fatalf("A's held claim after B's record was forgotten: %+v, %v; want a new record", ra.r, ra.err)
	}
	if ra.r.Token.Fence <= rb.Token.Fence {
		t.Errorf("A's held claim took fence %d, not above %d of B's forgotten record", ra.r.Token.Fence, rb.Token.Fence)
	}
}
