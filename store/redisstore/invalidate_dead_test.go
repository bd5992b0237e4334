package redisstore_test

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/redistest"
)

// freezer is a TCP proxy to a Redis whose connections can be frozen: a
// frozen connection stays open but carries nothing more either way, as a
// flow a NAT or load balancer dropped without a reset, or a peer that
// vanished. Connections made after the freeze work.
type freezer struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	conns  []*frozenPair
}

type frozenPair struct {
	mu     sync.Mutex
	frozen bool
}

func (p *frozenPair) isFrozen() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.frozen
}

func newFreezer(t *testing.T, target string) *freezer {
	f := &freezer{target: target}
	f.ln = proxy(t, target, func(c, u net.Conn) {
		p := &frozenPair{}
		f.mu.Lock()
		f.conns = append(f.conns, p)
		f.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			buf := make([]byte, 32<<10)
			for {
				n, err := src.Read(buf)
				if n > 0 && !p.isFrozen() {
					if _, werr := dst.Write(buf[:n]); werr != nil {
						return
					}
				}
				if err != nil {
					if !p.isFrozen() {
						dst.Close()
					}
					return
				}
			}
		}
		go pipe(u, c)
		go pipe(c, u)
	})
	return f
}

func (f *freezer) addr() string { return f.ln.Addr().String() }

// freeze freezes every connection open now.
func (f *freezer) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.conns {
		p.mu.Lock()
		p.frozen = true
		p.mu.Unlock()
	}
}

// B's invalidation subscription dies without closing (its flow is dropped
// silently): the Forget A makes then never reaches B. docs/operations.md
// promises that the client's checks find such a connection (go-redis
// pings an idle subscription every 3 s, 5 s timeout) and that B then
// drops its whole cache, about 8 s after the connection died plus the
// reconnection. go-redis's check only writes its PING: it never waits for
// the PONG, so a connection that swallows what it is sent is never found
// dead. B must drop the forgotten result within that bound.
func TestInvalidateSilentlyDeadSubscription(t *testing.T) {
	t.Parallel() // 15s, mostly waiting for the dead subscription to be noticed
	srv := redistest.Start(t, redistest.Options{})
	px := newFreezer(t, srv.Addr)
	prefix := fmt.Sprintf("id%d:", prefixSeq.Add(1))
	sa := newStoreWithPrefix(t, newClient(t, srv), prefix)
	cb := redis.NewClient(&redis.Options{Addr: px.addr()})
	t.Cleanup(func() { cb.Close() })
	sb := newStoreWithPrefix(t, cb, prefix)
	a := newRuntime(t, idem.Options{Store: sa})
	b := newRuntime(t, idem.Options{Store: sb, StoreTimeout: time.Second})
	fn := func(context.Context) (string, error) { return "v", nil }
	key := "dead-sub"
	if _, err := idem.Do(bg, a, key, fn); err != nil {
		t.Fatal(err)
	}
	var out idem.Outcome
	if _, err := idem.Do(bg, b, key, fn, idem.WithOutcome(&out)); err != nil || out != idem.Replayed {
		t.Fatalf("B: %v %v", out, err)
	}
	if n := b.Stats().CacheEntries; n != 1 {
		t.Fatalf("B caches %d results, want 1", n)
	}
	// An idle, healthy subscription is checked without being lost: B
	// keeps its cache across a few checks.
	idle := time.Now()
	for time.Since(idle) < 8*time.Second {
		if st := b.Stats(); st.CacheEntries != 1 || st.Invalidations != 0 {
			t.Fatalf("B, idle and connected, lost its cache: %+v", st)
		}
		time.Sleep(50 * time.Millisecond)
	}
	px.freeze()
	if err := a.Forget(bg, key); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	const bound = 30 * time.Second // the docs' 8 s, with room for a loaded machine
	for b.Stats().CacheEntries != 0 {
		if time.Since(start) > bound {
			t.Fatalf("B still caches the forgotten result %v after the Forget: its dead subscription was never noticed", bound)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("B dropped its cache %v after the Forget", time.Since(start))
}
