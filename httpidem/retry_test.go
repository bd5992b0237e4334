package httpidem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
)

// Retrying clients: a retry that arrives while the first attempt runs waits
// for it by default, and any 409 says when to come back.

// The case, with a real go-retryablehttp client and its default
// retry policy: the handler outlasts the client's first attempt, which
// times out; the client retries while the handler still runs; the retry
// waits and gets the first attempt's response. The handler is held until
// the server has seen the retry waiting, so the retry lands mid-run
// whatever the machine's speed. The server sees two attempts: the first
// ran the handler (Executed), the second was answered with its response
// by waiting for it (Joined), marked as a replay.
func TestRetryingClientGetsFirstResult(t *testing.T) {
	var outcomes outcomeLog
	rt := idemtest.Runtime(t, idem.Options{Observer: &outcomes})
	mw := newMiddleware(t, httpidem.Options{Runtime: rt}) // default Settle
	release := make(chan struct{})
	var runs atomic.Int32
	payments := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		<-release
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "charged 42 (run %d)", n)
	}))
	var attempts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		attempts.Add(1) // each attempt, as it reaches the middleware
		payments.ServeHTTP(w, r)
	}))
	defer srv.Close()
	defer close(release) // before srv.Close, which waits for the handlers

	client := retryablehttp.NewClient() // CheckRetry: retryablehttp.DefaultRetryPolicy
	client.Logger = nil
	// The first attempt times out (the held handler always outlasts it);
	// the retry's timeout is long enough for any machine.
	client.HTTPClient = &http.Client{Transport: &attemptTimeouts{
		base: srv.Client().Transport, first: 200 * time.Millisecond, later: idemtest.Timeout}}
	client.RetryWaitMin, client.RetryWaitMax, client.RetryMax = 10*time.Millisecond, 10*time.Millisecond, 4
	req, err := retryablehttp.NewRequest(http.MethodPost, srv.URL+"/payments", []byte(`{"amount":42}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(httpidem.HeaderKey, `"5f0c6a1e-7e0a-4d0c-9a55-7b6b0c1c2f11"`)
	replies := make(chan reply, 1)
	go func() {
		resp, err := client.Do(req)
		if err != nil {
			replies <- reply{err: err}
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		replies <- reply{status: resp.StatusCode, header: resp.Header, body: string(b),
			replayed: resp.Header.Get(httpidem.HeaderReplayed) == "true", err: err}
	}()

	idemtest.Eventually(t, "the retry waiting for the first attempt", func() bool {
		return attempts.Load() == 2 && rt.Stats().Waiters == 1
	})
	if runs.Load() != 1 {
		t.Fatalf("%d runs while the first attempt runs, want 1", runs.Load())
	}
	release <- struct{}{} // the first attempt's handler returns
	got := idemtest.Recv(t, replies)
	expect(t, "the client's answer", got, http.StatusCreated, true, "charged 42 (run 1)")
	if k := got.header.Get(httpidem.HeaderKey); k != `"5f0c6a1e-7e0a-4d0c-9a55-7b6b0c1c2f11"` {
		t.Fatalf("Idempotency-Key %q on the answer", k)
	}
	idemtest.Eventually(t, "both attempts' calls ended", func() bool { return len(outcomes.get()) == 2 })
	if n, o := attempts.Load(), outcomes.get(); runs.Load() != 1 || n != 2 || !slices.Contains(o, idem.Executed) || !slices.Contains(o, idem.Joined) {
		t.Fatalf("%d runs, %d attempts, outcomes %v; want 1 run, 2 attempts, one executed and one joined", runs.Load(), n, o)
	}
}

// attemptTimeouts is a transport that gives a client's first request the
// timeout first, and every later one the timeout later.
type attemptTimeouts struct {
	base         http.RoundTripper
	first, later time.Duration
	n            atomic.Int32
}

func (a *attemptTimeouts) RoundTrip(req *http.Request) (*http.Response, error) {
	timeout := a.later
	if a.n.Add(1) == 1 {
		timeout = a.first
	}
	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	resp, err := a.base.RoundTrip(req.WithContext(ctx))
	if err != nil {
		cancel()
		return nil, err
	}
	resp.Body = cancelOnClose{resp.Body, cancel}
	return resp, nil
}

type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelFunc
}

func (c cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel()
	return err
}

// outcomeLog is an idem.Observer that keeps the outcome of every call.
type outcomeLog struct {
	mu       sync.Mutex
	outcomes []idem.Outcome
}

func (l *outcomeLog) OnCall(ev idem.CallEvent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.outcomes = append(l.outcomes, ev.Outcome)
}

func (l *outcomeLog) OnStoreBatch(idem.StoreBatchEvent) {}

func (l *outcomeLog) get() []idem.Outcome {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.outcomes)
}

// Every 409 carries Retry-After (one second): with FailFast, once Settle is
// over, and through a custom OnError. (TestWaiterContextDeadlineIs409: when
// the waiter's own context ends first.)
func TestConflictCarriesRetryAfter(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	p := newPayments()
	onError := func(w http.ResponseWriter, r *http.Request, status int, err error) {
		http.Error(w, "busy", status)
	}
	failFast, _ := serve(t, httpidem.Options{Runtime: rt, Policy: idem.Policy{FailFast: true}}, p)
	settle, _ := serve(t, httpidem.Options{Runtime: rt, Policy: idem.Policy{Settle: time.Millisecond}}, p)
	custom, _ := serve(t, httpidem.Options{Runtime: rt, Policy: idem.Policy{FailFast: true}, OnError: onError}, p)

	release := p.Hold()
	defer release()
	owner := make(chan reply, 1)
	go func() { owner <- do(failFast, http.MethodPost, "/payments", "k", "x") }()
	p.WaitStarted(t)
	for _, c := range []struct {
		what string
		srv  *httptest.Server
	}{{"FailFast", failFast}, {"Settle over", settle}, {"custom OnError", custom}} {
		r := post(t, c.srv, "k", "x")
		if r.status != http.StatusConflict || r.header.Get("Retry-After") != "1" {
			t.Fatalf("%s: %d, Retry-After %q; want 409 with Retry-After 1", c.what, r.status, r.header.Get("Retry-After"))
		}
	}
	release()
	expect(t, "owner", idemtest.Recv(t, owner), http.StatusCreated, false, "")
}
