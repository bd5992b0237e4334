package httpidem_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
)

// Reading and forgetting what the middleware holds for a key and scope:
// Scope, Response, State and Forget.

// keyedRequest is a POST with key and the credential auth, as a client
// sends it.
func keyedRequest(key, auth string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/payments", nil)
	r.Header.Set(httpidem.HeaderKey, key)
	if auth != "" {
		r.Header.Set("Authorization", auth)
	}
	return r
}

// A response stored by a real request is read back by its key and the
// caller's scope: status, the headers the handler set (not those of outer
// middleware, nor the key's echo), body. Another caller's scope holds
// nothing for the key.
func TestResponseReadsBackAStoredResponse(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	mw := newMiddleware(t, httpidem.Options{Runtime: rt})
	inner := mw.Handler(newPayments())
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Request-Id", "outer")
		inner.ServeHTTP(w, r)
	}))
	defer srv.Close()
	sent := post(t, srv, `"k"`, "pay 10", "Authorization", "Bearer alice")
	expect(t, "first", sent, http.StatusCreated, false, "")

	scope := mw.Scope(keyedRequest(`"k"`, "Bearer alice"))
	got, err := mw.Response(bg, "k", scope)
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != http.StatusCreated || string(got.Body) != sent.body ||
		got.Header.Get("Location") != "/payments/1" || got.Header.Get("Content-Type") != "application/json" ||
		got.Header.Get("X-Request-Id") != "" || got.Header.Get(httpidem.HeaderKey) != "" {
		t.Fatalf("stored response %d %v %q; sent %q", got.Status, got.Header, got.Body, sent.body)
	}
	st, err := mw.State(bg, "k", scope)
	if err != nil || st.Status != idem.KeyCompleted || st.Size == 0 {
		t.Fatalf("state %+v, %v; want completed", st, err)
	}
	// Another caller, the anonymous scope: nothing for the key.
	for _, other := range []string{mw.Scope(keyedRequest("k", "Bearer bob")), ""} {
		if _, err := mw.Response(bg, "k", other); !errors.Is(err, idem.ErrNotFound) {
			t.Fatalf("scope %q: %v, want ErrNotFound", other, err)
		}
	}
	// The caller's copy is its own.
	got.Header.Set("Location", "/elsewhere")
	got.Body[0] = 'X'
	expect(t, "replay", post(t, srv, "k", "pay 10", "Authorization", "Bearer alice"), http.StatusCreated, true, sent.body)
}

// While the key's request runs: in progress (held here); absent before
// and for a key never used; once done, the response.
func TestResponseInProgressAndAbsent(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	p := newPayments()
	srv, mw := serve(t, httpidem.Options{Runtime: rt, SharedScope: true}, p)
	if _, err := mw.Response(bg, "k", ""); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("before: %v, want ErrNotFound", err)
	}
	if st, err := mw.State(bg, "k", ""); err != nil || st.Status != idem.KeyAbsent {
		t.Fatalf("before: %+v, %v; want absent", st, err)
	}
	release := p.Hold()
	defer release()
	owner := make(chan reply, 1)
	go func() { owner <- do(srv, http.MethodPost, "/payments", "k", "x") }()
	p.WaitStarted(t)
	if _, err := mw.Response(bg, "k", ""); !errors.Is(err, idem.ErrInProgress) {
		t.Fatalf("in flight: %v, want ErrInProgress", err)
	}
	if st, err := mw.State(bg, "k", ""); err != nil || st.Status != idem.KeyInProgress || !st.HeldHere || st.LeaseLeft <= 0 {
		t.Fatalf("in flight: %+v, %v; want in progress, held here", st, err)
	}
	if err := mw.Forget(bg, "k", ""); !errors.Is(err, idem.ErrConflict) {
		t.Fatalf("Forget in flight: %v, want ErrConflict", err)
	}
	release()
	first := idemtest.Recv(t, owner)
	if got, err := mw.Response(bg, "k", ""); err != nil || string(got.Body) != first.body {
		t.Fatalf("done: %v, %v; want %q", got, err, first.body)
	}
	if _, err := mw.Response(bg, "never-used", ""); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("never used: %v, want ErrNotFound", err)
	}
	if _, err := mw.Response(bg, "", ""); !errors.Is(err, idem.ErrInvalidKey) {
		t.Fatalf("empty key: %v, want ErrInvalidKey", err)
	}
}

// Forget deletes the stored response: the next request with the key runs
// the handler again, and its response is stored in turn. Forgetting a key
// that holds nothing is a no-op.
func TestForgetThenRequestRunsAgain(t *testing.T) {
	p := newPayments()
	srv, mw := serve(t, httpidem.Options{}, p)
	first := post(t, srv, "k", "x", "X-Api-Key", "alice")
	expect(t, "first", first, http.StatusCreated, false, "")
	r := httptest.NewRequest(http.MethodPost, "/payments", nil)
	r.Header.Set("X-Api-Key", "alice")
	if err := mw.Forget(bg, "k", mw.Scope(r)); err != nil {
		t.Fatal(err)
	}
	if _, err := mw.Response(bg, "k", mw.Scope(r)); !errors.Is(err, idem.ErrNotFound) {
		t.Fatalf("after Forget: %v, want ErrNotFound", err)
	}
	again := post(t, srv, "k", "x", "X-Api-Key", "alice")
	expect(t, "after Forget", again, http.StatusCreated, false, "")
	expect(t, "then stored", post(t, srv, "k", "x", "X-Api-Key", "alice"), http.StatusCreated, true, again.body)
	if p.runs.Load() != 2 {
		t.Fatalf("%d runs, want 2", p.runs.Load())
	}
	if err := mw.Forget(bg, "never-used", ""); err != nil {
		t.Fatalf("Forget of a key that holds nothing: %v", err)
	}
}

// Scope is the scope the middleware gives a request: Tenant's answer,
// "" with SharedScope or without credentials, else a digest of them (the
// same for the same credentials, another for others).
func TestScopeOfRequest(t *testing.T) {
	tenant := newMiddleware(t, httpidem.Options{Tenant: func(r *http.Request) string { return r.Header.Get("X-Account") }})
	shared := newMiddleware(t, httpidem.Options{SharedScope: true})
	creds := newMiddleware(t, httpidem.Options{CredentialCookies: []string{"sid"}})
	alice := keyedRequest("k", "Bearer alice")
	alice.Header.Set("X-Account", "acme")
	session := keyedRequest("k", "")
	session.AddCookie(&http.Cookie{Name: "sid", Value: "s1"})
	for _, c := range []struct {
		what string
		got  string
		want func(string) bool
	}{
		{"Tenant", tenant.Scope(alice), func(s string) bool { return s == "acme" }},
		{"SharedScope", shared.Scope(alice), func(s string) bool { return s == "" }},
		{"no credentials", creds.Scope(keyedRequest("k", "")), func(s string) bool { return s == "" }},
		{"Authorization", creds.Scope(alice), func(s string) bool { return s == creds.Scope(keyedRequest("k2", "bearer alice")) }},
		{"another caller", creds.Scope(keyedRequest("k", "Bearer bob")), func(s string) bool { return s != "" && s != creds.Scope(alice) }},
		{"session cookie", creds.Scope(session), func(s string) bool { return s != "" && s != creds.Scope(alice) }},
	} {
		if !c.want(c.got) {
			t.Errorf("%s: scope %q", c.what, c.got)
		}
	}
}

// On Redis, another instance reads the response a request stored, and
// sees the key in progress, held elsewhere, while it runs.
func TestResponseFromAnotherInstanceRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	prefix := fmt.Sprintf("h%d:", prefixSeq.Add(1))
	rtA, rtB := redisRuntime(t, srv, prefix), redisRuntime(t, srv, prefix)
	p := newPayments()
	a, _ := serve(t, httpidem.Options{Runtime: rtA}, p)
	mwB := newMiddleware(t, httpidem.Options{Runtime: rtB})
	scope := mwB.Scope(keyedRequest("k", "Bearer alice"))
	release := p.Hold()
	defer release()
	owner := make(chan reply, 1)
	go func() { owner <- do(a, http.MethodPost, "/payments", "k", "x", "Authorization", "Bearer alice") }()
	p.WaitStarted(t)
	if st, err := mwB.State(bg, "k", scope); err != nil || st.Status != idem.KeyInProgress || st.HeldHere {
		t.Fatalf("in flight on a: %+v, %v; want in progress, held elsewhere", st, err)
	}
	if _, err := mwB.Response(bg, "k", scope); !errors.Is(err, idem.ErrInProgress) {
		t.Fatalf("in flight on a: %v, want ErrInProgress", err)
	}
	release()
	first := idemtest.Recv(t, owner)
	got, err := mwB.Response(bg, "k", scope)
	if err != nil || got.Status != http.StatusCreated || string(got.Body) != first.body {
		t.Fatalf("from b: %+v, %v; want %q", got, err, first.body)
	}
}
