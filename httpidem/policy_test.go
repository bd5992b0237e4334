package httpidem_test

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/idemrt/idem/httpidem"
)

// What is stored by default, and what a handler can keep from being
// stored: a response a retry could change releases the key.

// The case: the handler rate-limits once; the client's retry with
// the same key runs and succeeds, instead of getting the 429 back for a
// day.
func TestRateLimited429IsNotStored(t *testing.T) {
	p := newPayments()
	srv, _ := serve(t, httpidem.Options{}, p)
	p.next(http.StatusTooManyRequests)
	expect(t, "rate limited", post(t, srv, "k", "pay 10"), http.StatusTooManyRequests, false, "")
	retry := post(t, srv, "k", "pay 10")
	expect(t, "retry", retry, http.StatusCreated, false, "")
	expect(t, "then", post(t, srv, "k", "pay 10"), http.StatusCreated, true, retry.body)
	if p.runs.Load() != 2 {
		t.Fatalf("%d runs, want 2", p.runs.Load())
	}
}

// A handler's 400 (malformed body) is not stored: the corrected request with
// the same key runs, rather than getting 422 (another body) or the 400.
func TestBadRequestIsNotStored(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if string(body) != `{"amount":10}` {
			http.Error(w, "malformed body", http.StatusBadRequest)
			return
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, "paid")
	})
	srv, _ := serve(t, httpidem.Options{}, h)
	expect(t, "malformed", post(t, srv, "k", `{"amount":10`), http.StatusBadRequest, false, "")
	expect(t, "corrected", post(t, srv, "k", `{"amount":10}`), http.StatusCreated, false, "paid")
	expect(t, "retried", post(t, srv, "k", `{"amount":10}`), http.StatusCreated, true, "paid")
}

// A handler's 401 (stale token) is not stored: the same request retried
// runs again, whether with the same credentials (the session was refreshed
// server-side) or with a fresh token.
func TestUnauthorizedIsNotStored(t *testing.T) {
	var valid atomic.Value
	valid.Store("Bearer fresh")
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		if r.Header.Get("Authorization") != valid.Load() {
			http.Error(w, "stale token", http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	srv, _ := serve(t, httpidem.Options{}, h)
	expect(t, "stale token", post(t, srv, "k", "x", "Authorization", "Bearer stale"), http.StatusUnauthorized, false, "")
	expect(t, "fresh token", post(t, srv, "k", "x", "Authorization", "Bearer fresh"), http.StatusCreated, false, "")

	// The same credentials, valid on the second try.
	valid.Store("Bearer later")
	expect(t, "not yet", post(t, srv, "k2", "x", "Authorization", "Bearer soon"), http.StatusUnauthorized, false, "")
	valid.Store("Bearer soon")
	expect(t, "same request again", post(t, srv, "k2", "x", "Authorization", "Bearer soon"), http.StatusCreated, false, "")
	if n := runs.Load(); n != 4 {
		t.Fatalf("%d runs, want 4", n)
	}
}

// Every status DefaultStoreStatus refuses releases the key: the retry runs.
// The ones it accepts (business outcomes) are replayed.
func TestDefaultPolicyOverHTTP(t *testing.T) {
	notStored := []int{
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect,
		400, 401, 403, 404, 405, 406, 408, 411, 412, 413, 414, 415, 417, 421, 422, 425, 428, 429, 431,
		500, 502, 503, 504,
	}
	stored := []int{200, 201, 202, 204, 303, 402, 409, 410}
	// Answers each status once (without Location, so that the client
	// follows no redirect), then 201.
	next := make(chan int, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case s := <-next:
			w.WriteHeader(s)
			fmt.Fprint(w, "status ", s)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	})
	// Per route, as recommended: the route's pattern tells a handler's 404
	// from a route miss.
	mw := newMiddleware(t, httpidem.Options{})
	mux := http.NewServeMux()
	mux.Handle("POST /payments", mw.Handler(h))
	srv := httptest.NewServer(mux)
	defer srv.Close()
	for _, s := range notStored {
		if httpidem.DefaultStoreStatus(s) {
			t.Errorf("DefaultStoreStatus(%d) = true", s)
		}
		key := fmt.Sprint("k", s)
		next <- s
		expect(t, fmt.Sprint(s), post(t, srv, key, "x"), s, false, "")
		expect(t, fmt.Sprint("retry of ", s), post(t, srv, key, "x"), http.StatusCreated, false, "")
	}
	for _, s := range stored {
		if !httpidem.DefaultStoreStatus(s) {
			t.Errorf("DefaultStoreStatus(%d) = false", s)
		}
		key := fmt.Sprint("k", s)
		next <- s
		first := post(t, srv, key, "x")
		expect(t, fmt.Sprint(s), first, s, false, "")
		expect(t, fmt.Sprint("retry of ", s), post(t, srv, key, "x"), s, true, first.body)
	}
	for _, s := range []int{100, 101, 199, 599, 600, 999} {
		if httpidem.DefaultStoreStatus(s) {
			t.Errorf("DefaultStoreStatus(%d) = true", s)
		}
	}
}

// Answers that turn on a request header the fingerprint does not cover
// (412 for a stale If-Match, 428 for none, 406 for an Accept it cannot
// meet) and validation errors answered with 422 are not stored: the retry
// with the header or the body fixed runs, instead of getting the old
// answer, or the middleware's 422 (key reused) for the corrected body. A
// service whose 422 is a business outcome stores it by wrapping the
// default.
func TestPreconditionAndValidationAnswersAreNotStored(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		switch {
		case r.Header.Get("If-Match") == "":
			w.WriteHeader(http.StatusPreconditionRequired)
		case r.Header.Get("If-Match") != `"v2"`:
			w.WriteHeader(http.StatusPreconditionFailed)
		case r.Header.Get("Accept") != "application/json":
			w.WriteHeader(http.StatusNotAcceptable)
		case string(body) != `{"amount":10}`:
			w.WriteHeader(http.StatusUnprocessableEntity)
			io.WriteString(w, `{"errors":{"amount":"must be a number"}}`)
		default:
			w.WriteHeader(http.StatusOK)
			io.WriteString(w, "updated")
		}
	})
	srv, _ := serve(t, httpidem.Options{}, h)
	json := []string{"Accept", "application/json"}
	expect(t, "no If-Match", post(t, srv, "k", `{"amount":10}`), http.StatusPreconditionRequired, false, "")
	expect(t, "stale If-Match", post(t, srv, "k", `{"amount":10}`, append(json, "If-Match", `"v1"`)...), http.StatusPreconditionFailed, false, "")
	expect(t, "no Accept", post(t, srv, "k", `{"amount":10}`, "If-Match", `"v2"`), http.StatusNotAcceptable, false, "")
	expect(t, "invalid body", post(t, srv, "k", `{"amount":"ten"}`, append(json, "If-Match", `"v2"`)...), http.StatusUnprocessableEntity, false, "")
	expect(t, "corrected", post(t, srv, "k", `{"amount":10}`, append(json, "If-Match", `"v2"`)...), http.StatusOK, false, "updated")

	business, _ := serve(t, httpidem.Options{StoreStatus: func(s int) bool {
		return s == http.StatusUnprocessableEntity || httpidem.DefaultStoreStatus(s)
	}}, h)
	first := post(t, business, "k", `{"amount":"ten"}`, append(json, "If-Match", `"v2"`)...)
	expect(t, "a business 422", first, http.StatusUnprocessableEntity, false, "")
	expect(t, "stored", post(t, business, "k", `{"amount":"ten"}`, append(json, "If-Match", `"v2"`)...), http.StatusUnprocessableEntity, true, first.body)
}

// net/http's ServeMux answers a POST to /payments, when it has only
// /payments/, with a 307 to /payments/; the client repeats the POST there
// with its key. Were the redirect stored under the key, that request would
// be a 422 (another path).
func TestRedirect307IsNotStored(t *testing.T) {
	p := newPayments()
	mw := newMiddleware(t, httpidem.Options{})
	mux := http.NewServeMux()
	mux.Handle("POST /payments/", p)
	srv := httptest.NewServer(mw.Handler(mux))
	defer srv.Close()
	first := post(t, srv, "k", "pay 10") // the client follows the redirect
	expect(t, "redirected", first, http.StatusCreated, false, "")
	expect(t, "retried at the new URL", call(t, srv, http.MethodPost, "/payments/", "k", "pay 10"), http.StatusCreated, true, first.body)
	if p.runs.Load() != 1 {
		t.Fatalf("%d runs, want 1", p.runs.Load())
	}
}

// NoStore keeps a response that StoreStatus would store from being stored;
// its client still gets it, and the retry runs.
func TestNoStoreReleasesKey(t *testing.T) {
	var runs atomic.Int32
	var marked atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if runs.Add(1) == 1 {
			marked.Store(httpidem.NoStore(w))
			io.WriteString(w, "upstream says try later")
			return
		}
		io.WriteString(w, "done")
	})
	srv, _ := serve(t, httpidem.Options{}, h)
	expect(t, "marked", post(t, srv, "k", "x"), http.StatusOK, false, "upstream says try later")
	if !marked.Load() {
		t.Fatal("NoStore on the middleware's writer returned false")
	}
	expect(t, "retry runs", post(t, srv, "k", "x"), http.StatusOK, false, "done")
	expect(t, "then stored", post(t, srv, "k", "x"), http.StatusOK, true, "done")
}

// unwrapping is a writer that inner middleware wraps around the
// middleware's, with Unwrap as http.ResponseController expects.
type unwrapping struct{ http.ResponseWriter }

func (u unwrapping) Unwrap() http.ResponseWriter { return u.ResponseWriter }

// opaque wraps a writer without Unwrap.
type opaque struct{ http.ResponseWriter }

// NoStore finds the middleware's writer under writers that wrap it with
// Unwrap, however deep.
func TestNoStoreThroughWrappingMiddleware(t *testing.T) {
	var runs atomic.Int32
	var marked atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		marked.Store(httpidem.NoStore(w))
		w.WriteHeader(http.StatusCreated)
	})
	inner := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			next.ServeHTTP(unwrapping{unwrapping{w}}, r)
		})
	}
	srv, _ := serve(t, httpidem.Options{}, inner(h))
	for i := range 2 {
		expect(t, fmt.Sprint("call ", i), post(t, srv, "k", "x"), http.StatusCreated, false, "")
	}
	if runs.Load() != 2 || !marked.Load() {
		t.Fatalf("%d runs, NoStore %v; want 2 and true", runs.Load(), marked.Load())
	}
}

// NoStore on a writer that is not the middleware's does nothing and says
// so: no middleware in front, or a wrapper without Unwrap.
func TestNoStoreOnAnotherWriterDoesNothing(t *testing.T) {
	if httpidem.NoStore(httptest.NewRecorder()) {
		t.Fatal("NoStore on a plain writer returned true")
	}
	var marked atomic.Bool
	marked.Store(true)
	var runs atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		marked.Store(httpidem.NoStore(opaque{w}))
		w.WriteHeader(http.StatusCreated)
	})
	srv, _ := serve(t, httpidem.Options{}, h)
	expect(t, "first", post(t, srv, "k", "x"), http.StatusCreated, false, "")
	expect(t, "stored all the same", post(t, srv, "k", "x"), http.StatusCreated, true, "")
	if marked.Load() || runs.Load() != 1 {
		t.Fatalf("NoStore through a writer without Unwrap: %v, %d runs", marked.Load(), runs.Load())
	}
}
