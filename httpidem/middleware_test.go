package httpidem_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/store/memstore"
)

// 50 concurrent POSTs with one key: the handler runs once, all get the same
// status and body, and the 49 that waited are marked as replays.
func TestStorm(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	p := newPayments()
	srv, _ := serve(t, httpidem.Options{Runtime: rt, Policy: idem.Policy{Settle: 10 * time.Second}}, p)
	release := p.Hold()
	defer release()
	const n = 50
	replies := make(chan reply, n)
	for range n {
		go func() { replies <- do(srv, http.MethodPost, "/payments", "storm-1", `{"amount":42}`) }()
	}
	p.WaitStarted(t)
	idemtest.Eventually(t, "49 parked requests", func() bool { return rt.Stats().Waiters == n-1 })
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
			t.Fatalf("reply %q %v, want the body %q", r.body, r.header, first)
		}
		if r.replayed {
			replayed++
		}
	}
	if p.runs.Load() != 1 || replayed != n-1 {
		t.Fatalf("%d runs, %d replays; want 1 and %d", p.runs.Load(), replayed, n-1)
	}
	// And later: a replay.
	expect(t, "later", post(t, srv, "storm-1", `{"amount":42}`), http.StatusCreated, true, first)
}

// With FailFast, the duplicates of a request in flight get 409 at once,
// with Retry-After; once it is done they get its response.
func TestFailFastStormGets409(t *testing.T) {
	p := newPayments()
	srv, _ := serve(t, httpidem.Options{Policy: idem.Policy{FailFast: true}}, p)
	release := p.Hold()
	defer release()
	owner := make(chan reply, 1)
	go func() { owner <- do(srv, http.MethodPost, "/payments", "storm-2", "pay") }()
	p.WaitStarted(t)
	var wg sync.WaitGroup
	replies := make(chan reply, 49)
	for range 49 {
		wg.Go(func() { replies <- do(srv, http.MethodPost, "/payments", "storm-2", "pay") })
	}
	wg.Wait()
	close(replies)
	for r := range replies {
		expectProblem(t, "duplicate in flight", r, http.StatusConflict)
		if r.header.Get("Retry-After") != "1" {
			t.Fatalf("409 with Retry-After %q, want 1", r.header.Get("Retry-After"))
		}
	}
	release()
	first := <-owner
	expect(t, "owner", first, http.StatusCreated, false, "")
	expect(t, "after", post(t, srv, "storm-2", "pay"), http.StatusCreated, true, first.body)
	if p.runs.Load() != 1 {
		t.Fatalf("%d runs", p.runs.Load())
	}
}

// A waiter whose settle time runs out gets 409; the run goes on.
func TestSettleTimeout(t *testing.T) {
	p := newPayments()
	srv, _ := serve(t, httpidem.Options{Policy: idem.Policy{Settle: 100 * time.Millisecond}}, p)
	release := p.Hold()
	defer release()
	owner := make(chan reply, 1)
	go func() { owner <- do(srv, http.MethodPost, "/payments", "k", "pay") }()
	p.WaitStarted(t)
	start := time.Now()
	expectProblem(t, "waiter", post(t, srv, "k", "pay"), http.StatusConflict)
	if d := time.Since(start); d < 90*time.Millisecond {
		t.Fatalf("409 after %v, before the settle time", d)
	}
	release()
	expect(t, "owner", <-owner, http.StatusCreated, false, "")
}

// A waiter whose request context runs out (a timeout middleware) before the
// settle time gets 409, as docs/http.md says.
func TestWaiterContextDeadlineIs409(t *testing.T) {
	p := newPayments()
	mw := newMiddleware(t, httpidem.Options{Policy: idem.Policy{Settle: 10 * time.Second}, Logger: nil})
	inner := mw.Handler(p)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Timeout") != "" {
			ctx, cancel := context.WithTimeout(r.Context(), 100*time.Millisecond)
			defer cancel()
			r = r.WithContext(ctx)
		}
		inner.ServeHTTP(w, r)
	})
	srv := httptest.NewServer(h)
	defer srv.Close()
	release := p.Hold()
	defer release()
	owner := make(chan reply, 1)
	go func() { owner <- do(srv, http.MethodPost, "/payments", "k", "pay") }()
	p.WaitStarted(t)
	r := do(srv, http.MethodPost, "/payments", "k", "pay", "X-Timeout", "1")
	release()
	<-owner
	if r.err != nil || r.status != http.StatusConflict || r.header.Get("Retry-After") != "1" {
		t.Fatalf("waiter whose context ran out: %d %q %v, want 409 with Retry-After: 1", r.status, r.body, r.header)
	}
}

// The same key with a different request (body, path, method, query) is 422
// on every path: in flight (failing fast or waiting), completed in this
// runtime's cache, completed in the store.
func TestMismatch(t *testing.T) {
	mem := memstore.New(memstore.Options{})
	defer mem.Close()
	st := &downable{Store: mem}
	rt := idemtest.Runtime(t, idem.Options{Store: st})
	p := newPayments()
	srv, _ := serve(t, httpidem.Options{Runtime: rt}, p)
	srvWait, _ := serve(t, httpidem.Options{Runtime: rt, Policy: idem.Policy{Settle: 10 * time.Second}}, p)
	others := []struct {
		method, path, body string
	}{
		{http.MethodPost, "/payments", "amount=99"},
		{http.MethodPost, "/refunds", "amount=10"},
		{http.MethodPatch, "/payments", "amount=10"},
		{http.MethodPost, "/payments?dry_run=1", "amount=10"},
		{http.MethodPost, "/payments", ""},
	}
	check := func(what string) {
		t.Helper()
		for _, o := range others {
			expectProblem(t, what+" "+o.method+" "+o.path+" "+o.body, call(t, srv, o.method, o.path, "k1", o.body), http.StatusUnprocessableEntity)
			expectProblem(t, what+" (waiting) "+o.method+" "+o.path, call(t, srvWait, o.method, o.path, "k1", o.body), http.StatusUnprocessableEntity)
		}
	}

	release := p.Hold()
	owner := make(chan reply, 1)
	go func() { owner <- do(srv, http.MethodPost, "/payments", "k1", "amount=10") }()
	p.WaitStarted(t)
	check("in flight")
	release()
	first := <-owner
	expect(t, "owner", first, http.StatusCreated, false, "")

	// From the cache: the store is down, and the answers do not change.
	st.down.Store(true)
	check("cached")
	expect(t, "cached replay", post(t, srv, "k1", "amount=10"), http.StatusCreated, true, first.body)
	st.down.Store(false)

	// From the store: a second instance on the same store, its cache empty.
	rt2 := idemtest.Runtime(t, idem.Options{Store: mem, DisableCache: true})
	srv2, _ := serve(t, httpidem.Options{Runtime: rt2}, p)
	srv, srvWait = srv2, srv2
	check("stored")
	expect(t, "stored replay", post(t, srv2, "k1", "amount=10"), http.StatusCreated, true, first.body)
	if p.runs.Load() != 1 {
		t.Fatalf("%d runs", p.runs.Load())
	}
}

// A 5xx is not stored: the retry runs the handler. A 402 is: the retry gets
// it back.
func TestStatusPolicy(t *testing.T) {
	p := newPayments()
	srv, _ := serve(t, httpidem.Options{}, p)

	p.next(http.StatusServiceUnavailable)
	expect(t, "503", post(t, srv, "k503", "x"), http.StatusServiceUnavailable, false, "")
	retry := post(t, srv, "k503", "x")
	expect(t, "retry of 503", retry, http.StatusCreated, false, "")
	expect(t, "then", post(t, srv, "k503", "x"), http.StatusCreated, true, retry.body)
	if p.runs.Load() != 2 {
		t.Fatalf("%d runs, want 2", p.runs.Load())
	}

	p.next(http.StatusPaymentRequired)
	declined := post(t, srv, "k402", "x")
	expect(t, "402", declined, http.StatusPaymentRequired, false, "")
	expect(t, "retry of 402", post(t, srv, "k402", "x"), http.StatusPaymentRequired, true, declined.body)
	if p.runs.Load() != 3 {
		t.Fatalf("%d runs, want 3", p.runs.Load())
	}

	// StoreStatus can change the policy: keep only 2xx.
	q := newPayments()
	srv2, _ := serve(t, httpidem.Options{StoreStatus: func(s int) bool { return s < 300 }}, q)
	q.next(http.StatusPaymentRequired)
	expect(t, "402 not kept", post(t, srv2, "k", "x"), http.StatusPaymentRequired, false, "")
	expect(t, "retry runs", post(t, srv2, "k", "x"), http.StatusCreated, false, "")
	if q.runs.Load() != 2 {
		t.Fatalf("%d runs, want 2", q.runs.Load())
	}
}

// A waiter of a request whose response is not stored is handed the key and
// runs its own request, like a retry.
func TestWaiterRunsAfterFailure(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	p := newPayments()
	srv, _ := serve(t, httpidem.Options{Runtime: rt, Policy: idem.Policy{Settle: 10 * time.Second}}, p)
	p.next(http.StatusBadGateway)
	release := p.Hold()
	defer release()
	owner := make(chan reply, 1)
	go func() { owner <- do(srv, http.MethodPost, "/payments", "k", "x") }()
	p.WaitStarted(t)
	waiter := make(chan reply, 1)
	go func() { waiter <- do(srv, http.MethodPost, "/payments", "k", "x") }()
	idemtest.Eventually(t, "the parked waiter", func() bool { return rt.Stats().Waiters == 1 })
	release()
	expect(t, "owner", <-owner, http.StatusBadGateway, false, "")
	expect(t, "waiter", <-waiter, http.StatusCreated, false, "")
	if p.runs.Load() != 2 {
		t.Fatalf("%d runs, want 2", p.runs.Load())
	}
}

// Keys are scoped per tenant: the same key in two tenants runs twice, and
// each tenant gets its own response back.
func TestTenantIsolation(t *testing.T) {
	p := newPayments()
	tenant := func(r *http.Request) string { return r.Header.Get("X-Tenant") }
	srv, _ := serve(t, httpidem.Options{Tenant: tenant}, p)
	cases := []struct{ tenant, key string }{
		{"", "k"}, {"acme", "k"}, {"globex", "k"},
		// ff:idemp:a:http:http:k against ff:idemp:a%3Ahttp:http:k
		{"a", "http:k"}, {"a:http", "k"},
	}
	bodies := map[string]string{}
	for _, c := range cases {
		r := post(t, srv, c.key, "same body", "X-Tenant", c.tenant)
		expect(t, "first in "+c.tenant, r, http.StatusCreated, false, "")
		bodies[c.tenant+"|"+c.key] = r.body
	}
	for _, c := range cases {
		expect(t, "replay in "+c.tenant, post(t, srv, c.key, "same body", "X-Tenant", c.tenant), http.StatusCreated, true, bodies[c.tenant+"|"+c.key])
	}
	if int(p.runs.Load()) != len(cases) {
		t.Fatalf("%d runs, want %d", p.runs.Load(), len(cases))
	}
	// A tenant that cannot be part of a key is the service's fault: a
	// clean 500, and nothing runs.
	expectProblem(t, "huge tenant", post(t, srv, "k", "x", "X-Tenant", strings.Repeat("t", 2000)), http.StatusInternalServerError)
}

// Missing, empty, malformed and oversized keys are 400s, and the handler
// does not run; the quoted and bare forms of a key are the same key.
func TestBadKeys(t *testing.T) {
	p := newPayments()
	srv, _ := serve(t, httpidem.Options{}, p)
	expectProblem(t, "no key", post(t, srv, "", "x"), http.StatusBadRequest)
	for _, k := range []string{
		`""`, `"abc`, `"a"b`, `"a";p=1`, `a b`, `a,b`, `ключ`, `"ключ"`, `a"b`, `a\b`, `"a\b"`,
		strings.Repeat("k", httpidem.MaxKeyLen+1),
		`"` + strings.Repeat("k", httpidem.MaxKeyLen+1) + `"`,
	} {
		r := post(t, srv, k, "x")
		expectProblem(t, "key "+k, r, http.StatusBadRequest)
		if !strings.Contains(r.body, "Idempotency-Key") {
			t.Errorf("key %s: the detail does not say what is wrong: %s", k, r.body)
		}
	}
	// An empty header, and the header twice.
	for _, vals := range [][]string{{""}, {"a", "b"}} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", strings.NewReader("x"))
		req.Header[httpidem.HeaderKey] = vals
		expectProblem(t, fmt.Sprintf("header %q", vals), send(srv, req), http.StatusBadRequest)
	}
	if p.runs.Load() != 0 {
		t.Fatalf("%d runs", p.runs.Load())
	}

	max := strings.Repeat("k", httpidem.MaxKeyLen)
	first := post(t, srv, max, "x")
	expect(t, "longest key", first, http.StatusCreated, false, "")
	expect(t, "quoted form of it", post(t, srv, `"`+max+`"`, "x"), http.StatusCreated, true, first.body)
	uuid := post(t, srv, `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "x")
	expect(t, "bare form of a quoted key", post(t, srv, "8e03978e-40d5-43e8-bc93-6894a57f9324", "x"), http.StatusCreated, true, uuid.body)
	expect(t, "escapes", post(t, srv, `"a\"b\\c"`, "x"), http.StatusCreated, false, "")
	expect(t, "odd but valid", post(t, srv, `a:b/c%d?e=f;g`, "x"), http.StatusCreated, false, "")
}

// The middleware applies to the configured methods only; with Optional,
// requests without a key pass through.
func TestMethodsAndOptional(t *testing.T) {
	p := newPayments()
	srv, _ := serve(t, httpidem.Options{}, p)
	for _, m := range []string{http.MethodGet, http.MethodPut, http.MethodDelete} {
		expect(t, m+" without a key", call(t, srv, m, "/payments", "", ""), http.StatusCreated, false, "")
		expect(t, m+" with a key", call(t, srv, m, "/payments", "k", ""), http.StatusCreated, false, "")
	}
	expectProblem(t, "PATCH without a key", call(t, srv, http.MethodPatch, "/payments", "", ""), http.StatusBadRequest)
	if p.runs.Load() != 6 {
		t.Fatalf("%d runs, want 6", p.runs.Load())
	}

	q := newPayments()
	srv2, _ := serve(t, httpidem.Options{Methods: []string{http.MethodPut}, Optional: true}, q)
	expect(t, "PUT without a key", call(t, srv2, http.MethodPut, "/x", "", ""), http.StatusCreated, false, "")
	expect(t, "PUT without a key again", call(t, srv2, http.MethodPut, "/x", "", ""), http.StatusCreated, false, "")
	expect(t, "PUT with a key", call(t, srv2, http.MethodPut, "/x", "k", ""), http.StatusCreated, false, "")
	expect(t, "PUT with a key again", call(t, srv2, http.MethodPut, "/x", "k", ""), http.StatusCreated, true, "")
	expect(t, "POST with a key", call(t, srv2, http.MethodPost, "/x", "k2", ""), http.StatusCreated, false, "")
	expect(t, "POST with a key again", call(t, srv2, http.MethodPost, "/x", "k2", ""), http.StatusCreated, false, "")
	if q.runs.Load() != 5 {
		t.Fatalf("%d runs, want 5", q.runs.Load())
	}
}

// Request bodies are bounded (413) and reach the handler intact.
func TestRequestBody(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		sum := sha256.Sum256(b)
		fmt.Fprintf(w, "%d %d %s", r.ContentLength, len(b), hex.EncodeToString(sum[:]))
	})
	srv, _ := serve(t, httpidem.Options{MaxRequestBody: 64 << 10}, echo)
	body := make([]byte, 64<<10)
	_, _ = rand.Read(body)
	sum := sha256.Sum256(body)
	want := fmt.Sprintf("%d %d %s", len(body), len(body), hex.EncodeToString(sum[:]))
	expect(t, "at the limit", post(t, srv, "k1", string(body)), http.StatusOK, false, want)

	big := string(body) + "!"
	expectProblem(t, "over the limit", post(t, srv, "k2", big), http.StatusRequestEntityTooLarge)
	// Without a Content-Length (chunked), the limit holds as the body is read.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/payments", io.MultiReader(strings.NewReader(big)))
	req.Header.Set(httpidem.HeaderKey, "k3")
	expectProblem(t, "chunked over the limit", send(srv, req), http.StatusRequestEntityTooLarge)
	req, _ = http.NewRequest(http.MethodPost, srv.URL+"/payments", io.MultiReader(bytes.NewReader(body)))
	req.Header.Set(httpidem.HeaderKey, "k4")
	expect(t, "chunked at the limit", send(srv, req), http.StatusOK, false, want)
	expect(t, "empty body", post(t, srv, "k5", ""), http.StatusOK, false,
		"0 0 e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
}

// A response over MaxStoredBody goes to its client but is not stored: the key
// is released, with a warning, and the retry runs.
func TestLargeResponse(t *testing.T) {
	var logs logBuffer
	var runs atomic.Int32
	big := strings.Repeat("x", 100)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, big)
	})
	srv, _ := serve(t, httpidem.Options{MaxStoredBody: 99, Logger: logs.logger()}, h)
	expect(t, "first", post(t, srv, "k", "x"), http.StatusCreated, false, big)
	if out := logs.String(); !strings.Contains(out, "level=WARN") || !strings.Contains(out, "bytes=100") || !strings.Contains(out, "limit=99") {
		t.Fatalf("no warning:\n%s", out)
	}
	expect(t, "retry", post(t, srv, "k", "x"), http.StatusCreated, false, big)
	if n := runs.Load(); n != 2 {
		t.Fatalf("%d runs, want 2", n)
	}
}

// A client that goes away does not stop the handler (its request stays
// until the handler returns, as net/http's do); its response is stored for
// the retry.
func TestClientGoesAway(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	p := newPayments()
	srv, _ := serve(t, httpidem.Options{Runtime: rt, Policy: idem.Policy{Settle: 10 * time.Second}}, p)
	release := p.Hold()
	defer release()
	if r := leave(t, srv, "/payments", "k", func() { p.WaitStarted(t) }); r.err == nil {
		t.Fatalf("cancelled request: %+v", r)
	}
	release()
	expect(t, "retry", post(t, srv, "k", "x"), http.StatusCreated, true, "")
	if p.runs.Load() != 1 {
		t.Fatalf("%d runs", p.runs.Load())
	}
}

func TestOptions(t *testing.T) {
	for _, o := range []httpidem.Options{
		{Policy: idem.Policy{Settle: -1}}, {Policy: idem.Policy{TTL: -time.Second}}, {Policy: idem.Policy{Lease: -1}}, {Policy: idem.Policy{TTL: 200 * 365 * 24 * time.Hour}},
		{MaxRequestBody: -1}, {MaxStoredBody: -1}, {Methods: []string{""}}, {Methods: []string{"PO ST"}}, {Methods: []string{"post"}},
	} {
		if _, err := httpidem.New(o); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", o, err)
		}
	}
	mw, err := httpidem.New(httpidem.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close(bg)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("Handler(nil) did not panic")
			}
		}()
		mw.Handler(nil)
	}()
}

// After Close, the middleware's own runtime is closed: 503. Close is
// idempotent; a given runtime is not closed.
func TestClose(t *testing.T) {
	p := newPayments()
	srv, mw := serve(t, httpidem.Options{}, p)
	expect(t, "open", post(t, srv, "k", "x"), http.StatusCreated, false, "")
	for range 2 {
		if err := mw.Close(bg); err != nil {
			t.Fatal(err)
		}
	}
	r := post(t, srv, "k2", "x")
	expectProblem(t, "closed", r, http.StatusServiceUnavailable)
	if r.header.Get("Retry-After") == "" {
		t.Fatal("no Retry-After on 503")
	}

	rt := idemtest.Runtime(t, idem.Options{})
	mw2, _ := httpidem.New(httpidem.Options{Runtime: rt})
	_ = mw2.Close(bg)
	if _, err := idem.Do(bg, rt, "k", func(context.Context) (int, error) { return 1, nil }); err != nil {
		t.Fatalf("the given runtime was closed: %v", err)
	}
}

// OnError replaces the error responses; it gets the status and the error.
func TestOnError(t *testing.T) {
	var got []string
	onErr := func(w http.ResponseWriter, r *http.Request, status int, err error) {
		got = append(got, fmt.Sprint(status, errors.Is(err, httpidem.ErrMissingKey)))
		http.Error(w, "nope", status)
	}
	srv, _ := serve(t, httpidem.Options{OnError: onErr}, newPayments())
	r := post(t, srv, "", "x")
	if r.status != http.StatusBadRequest || r.body != "nope\n" || strings.Join(got, ",") != "400 true" {
		t.Fatalf("%+v %v", r, got)
	}
}

func TestStatusFor(t *testing.T) {
	for err, want := range map[error]int{
		httpidem.ErrMissingKey:                        400,
		fmt.Errorf("x: %w", httpidem.ErrMalformedKey): 400,
		httpidem.ErrBodyRead:                          400,
		idem.ErrInvalidKey:                            400,
		httpidem.ErrBodyTooLarge:                      413,
		idem.ErrFingerprintMismatch:                   422,
		&idem.ConflictError{Key: "k"}:                 409,
		&idem.PanicError{Value: 1}:                    500,
		idem.ErrLeaseLost:                             500,
		idem.ErrOverloaded:                            503,
		idem.ErrClosed:                                503,
		&idem.StoreError{Err: errors.New("x")}:        503,
		context.Canceled:                              503,
		errors.New("anything else"):                   500,
	} {
		if got := httpidem.StatusFor(err); got != want {
			t.Errorf("StatusFor(%v) = %d, want %d", err, got, want)
		}
	}
}

// Version keeps the keys of two APIs on one runtime apart.
func TestVersion(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	p := newPayments()
	v1, _ := serve(t, httpidem.Options{Runtime: rt}, p)
	v2, _ := serve(t, httpidem.Options{Runtime: rt, Version: "v2"}, p)
	expect(t, "v1", post(t, v1, "k", "x"), http.StatusCreated, false, "")
	expect(t, "v2", post(t, v2, "k", "x"), http.StatusCreated, false, "")
	expect(t, "v1 again", post(t, v1, "k", "x"), http.StatusCreated, true, "")
	if p.runs.Load() != 2 {
		t.Fatalf("%d runs, want 2", p.runs.Load())
	}
}
