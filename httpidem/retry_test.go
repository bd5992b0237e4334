package httpidem_test

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
// retry policy: the handler outlasts the client's per-attempt timeout; the
// client gives up on the first attempt and retries while the handler still
// runs; the retry waits and gets the first attempt's response. The handler
// is held until the server has seen the retry waiting, so the retry lands
// mid-run whatever the machine's speed.
func TestRetryingClientGetsFirstResult(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	mw := newMiddleware(t, httpidem.Options{Runtime: rt, Logger: slog.New(slog.DiscardHandler)}) // default Settle
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
	// A per-attempt timeout the held handler always outlasts; retries soon
	// after it, and enough of them that a retry too slow to be answered
	// within its own timeout is followed by another.
	client.HTTPClient = &http.Client{Transport: srv.Client().Transport, Timeout: time.Second}
	client.RetryWaitMin, client.RetryWaitMax, client.RetryMax = 10*time.Millisecond, 10*time.Millisecond, 10
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

	idemtest.Eventually(t, "a retry waiting for the first attempt", func() bool {
		return attempts.Load() >= 2 && rt.Stats().Waiters == 1
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
	if runs.Load() != 1 {
		t.Fatalf("%d runs, want 1", runs.Load())
	}
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
	failFast, _ := serve(t, httpidem.Options{Runtime: rt, FailFast: true}, p)
	settle, _ := serve(t, httpidem.Options{Runtime: rt, Settle: time.Millisecond}, p)
	custom, _ := serve(t, httpidem.Options{Runtime: rt, FailFast: true, OnError: onError}, p)

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
