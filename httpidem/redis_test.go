package httpidem_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store/redisstore"
)

var prefixSeq atomic.Int64

// redisRuntime returns a runtime on srv with a client of its own, as a
// service instance has; runtimes with one prefix share their keys.
func redisRuntime(t *testing.T, srv *redistest.Server, prefix string) *idem.Runtime {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	s, err := redisstore.New(bg, c, redisstore.Options{KeyPrefix: prefix})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return idemtest.Runtime(t, idem.Options{Store: s})
}

// 50 concurrent POSTs with one key, spread over two instances on one Redis:
// one run, one response for all, 49 marked as replays.
func TestRedisStorm(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	prefix := fmt.Sprintf("h%d:", prefixSeq.Add(1))
	rtA, rtB := redisRuntime(t, srv, prefix), redisRuntime(t, srv, prefix)
	p := newPayments()
	tenant := func(r *http.Request) string { return r.Header.Get("X-Tenant") }
	a, _ := serve(t, httpidem.Options{Runtime: rtA, Policy: idem.Policy{Settle: 10 * time.Second}, Tenant: tenant}, p)
	b, _ := serve(t, httpidem.Options{Runtime: rtB, Policy: idem.Policy{Settle: 10 * time.Second}, Tenant: tenant}, p)
	release := p.Hold()
	defer release()
	const n = 50
	replies := make(chan reply, n)
	go func() { replies <- do(a, http.MethodPost, "/payments", "k", "pay 10", "X-Tenant", "acme") }()
	p.WaitStarted(t)
	for i := range n - 1 {
		srv := a
		if i%2 == 1 {
			srv = b
		}
		go func() { replies <- do(srv, http.MethodPost, "/payments", "k", "pay 10", "X-Tenant", "acme") }()
	}
	idemtest.Eventually(t, "49 parked requests", func() bool { return rtA.Stats().Waiters+rtB.Stats().Waiters == n-1 })
	release()
	var first string
	replayed := 0
	for range n {
		r := <-replies
		if r.err != nil || r.status != http.StatusCreated {
			t.Fatalf("reply: %+v", r)
		}
		if first == "" {
			first = r.body
		}
		if r.body != first || r.header.Get("Location") != "/payments/1" {
			t.Fatalf("reply %q, want %q", r.body, first)
		}
		if r.replayed {
			replayed++
		}
	}
	if p.runs.Load() != 1 || replayed != n-1 {
		t.Fatalf("%d runs, %d replays", p.runs.Load(), replayed)
	}
	// Another tenant, same key, on the other instance: its own run.
	expect(t, "other tenant", post(t, b, "k", "pay 10", "X-Tenant", "globex"), http.StatusCreated, false, "")
	expect(t, "first tenant again", post(t, b, "k", "pay 10", "X-Tenant", "acme"), http.StatusCreated, true, first)
	if p.runs.Load() != 2 {
		t.Fatalf("%d runs, want 2", p.runs.Load())
	}
}

// A key reused with another body is 422 on Redis: held by another instance,
// and after a restart (a new runtime on the same Redis), where the stored
// response is still replayed to the same request.
func TestRedisMismatchAndRestart(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	prefix := fmt.Sprintf("h%d:", prefixSeq.Add(1))
	p := newPayments()

	rt1 := redisRuntime(t, srv, prefix)
	s1, _ := serve(t, httpidem.Options{Runtime: rt1}, p)
	first := post(t, s1, "k1", "amount=10")
	expect(t, "first", first, http.StatusCreated, false, "")

	// In flight on instance 1, asked on instance 2.
	rt2 := redisRuntime(t, srv, prefix)
	s2, _ := serve(t, httpidem.Options{Runtime: rt2, Policy: idem.Policy{FailFast: true}}, p)
	release := p.Hold()
	defer release()
	owner := make(chan reply, 1)
	go func() { owner <- do(s1, http.MethodPost, "/payments", "k2", "amount=10") }()
	p.WaitStarted(t)
	expectProblem(t, "in flight elsewhere, other body", post(t, s2, "k2", "amount=99"), http.StatusUnprocessableEntity)
	expectProblem(t, "in flight elsewhere, same body", post(t, s2, "k2", "amount=10"), http.StatusConflict)
	release()
	expect(t, "owner of k2", <-owner, http.StatusCreated, false, "")

	// Restart: instance 1 goes away; a new one comes up on the same Redis.
	s1.Close()
	if err := rt1.Close(bg); err != nil {
		t.Fatal(err)
	}
	rt3 := redisRuntime(t, srv, prefix)
	s3, _ := serve(t, httpidem.Options{Runtime: rt3}, p)
	expectProblem(t, "after restart, other body", post(t, s3, "k1", "amount=99"), http.StatusUnprocessableEntity)
	expect(t, "after restart, same body", post(t, s3, "k1", "amount=10"), http.StatusCreated, true, first.body)
	// Now from rt3's cache.
	expectProblem(t, "cached, other body", post(t, s3, "k1", "amount=99"), http.StatusUnprocessableEntity)
	expect(t, "cached, same body", post(t, s3, "k1", "amount=10"), http.StatusCreated, true, first.body)
	if p.runs.Load() != 2 {
		t.Fatalf("%d runs, want 2", p.runs.Load())
	}
}

// Two instances of a service on one real Redis, with the default options: a
// duplicate that lands on the second instance while the first runs waits,
// and gets the first instance's response (one run). The caller's scope is a
// digest of its credentials, the same on both instances.
func TestDuplicateOnSecondInstanceGetsFirstResponse(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	prefix := fmt.Sprintf("h%d:", prefixSeq.Add(1))
	rtA, rtB := redisRuntime(t, srv, prefix), redisRuntime(t, srv, prefix)
	p := newPayments()
	a, _ := serve(t, httpidem.Options{Runtime: rtA}, p)
	b, _ := serve(t, httpidem.Options{Runtime: rtB}, p)
	release := p.Hold()
	defer release()
	first := make(chan reply, 1)
	go func() { first <- do(a, http.MethodPost, "/payments", "k", "pay 10", "Authorization", "Bearer alice") }()
	p.WaitStarted(t)
	duplicate := make(chan reply, 1)
	go func() {
		duplicate <- do(b, http.MethodPost, "/payments", "k", "pay 10", "Authorization", "Bearer alice")
	}()
	idemtest.Eventually(t, "the duplicate waiting on instance b", func() bool { return rtB.Stats().Waiters == 1 })
	release()
	owner := idemtest.Recv(t, first)
	expect(t, "first, on a", owner, http.StatusCreated, false, "")
	expect(t, "duplicate, on b", idemtest.Recv(t, duplicate), http.StatusCreated, true, owner.body)
	// Another caller with the key, on b: its own run.
	expect(t, "another caller, on b", post(t, b, "k", "pay 10", "Authorization", "Bearer bob"), http.StatusCreated, false, "")
	if p.runs.Load() != 2 {
		t.Fatalf("%d runs, want 2", p.runs.Load())
	}
}

// On a Redis whose proto-max-bulk-len is 1 MB, the runtime's result limit
// is under the default MaxStoredBody (1 MiB): the default gives way, so a
// response just under 1 MiB is sent and released, as any response over
// MaxStoredBody (it used to be stored as a permanent "result too large",
// replayed as a 500); a MaxStoredBody set over the limit is refused at New.
func TestStoredBodyUnderTheStoresLimit(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{Args: []string{"--proto-max-bulk-len", "1mb"}})
	rt := redisRuntime(t, srv, "small:")
	if _, err := httpidem.New(httpidem.Options{Runtime: rt, MaxStoredBody: 1 << 20}); !errors.Is(err, idem.ErrInvalidArgument) {
		t.Fatalf("MaxStoredBody over the runtime's limit: %v, want ErrInvalidArgument", err)
	}
	var runs atomic.Int32
	body := strings.Repeat("b", 1<<20-100)
	srvA, _ := serve(t, httpidem.Options{Runtime: rt, SharedScope: true}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, body)
	}))
	for i := range 2 {
		r := post(t, srvA, "k", "x")
		if r.status != http.StatusCreated || len(r.body) != len(body) {
			t.Fatalf("request %d: %d with %d bytes", i, r.status, len(r.body))
		}
	}
	if runs.Load() != 2 {
		t.Fatalf("%d runs, want 2: the response was not to be stored", runs.Load())
	}
}
