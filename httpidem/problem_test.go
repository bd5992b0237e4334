package httpidem_test

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
)

// Problem details (RFC 9457): each problem has a type URI of its own that
// links to its documentation, in the body and in a Link header, and a
// title that says what went wrong.

type problemDoc struct {
	Type, Title, Detail string
	Status              int
}

// expectType checks that a reply is the problem name, documented under
// base.
func expectType(t *testing.T, what string, r reply, status int, base, name, title string) {
	t.Helper()
	expectProblem(t, what, r, status)
	var p problemDoc
	_ = json.Unmarshal([]byte(r.body), &p)
	uri := base + name
	if p.Type != uri || p.Title != title {
		t.Fatalf("%s: type %q title %q; want %q %q", what, p.Type, p.Title, uri, title)
	}
	if l := r.header.Get("Link"); l != "<"+uri+`>; rel="describedby"` {
		t.Fatalf("%s: Link %q", what, l)
	}
}

// Every problem the middleware answers with, over HTTP: its type, title and
// Link.
func TestProblemTypesAndLinks(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	p := newPayments()
	base := httpidem.DefaultDocsURL
	srv, _ := serve(t, httpidem.Options{
		Runtime:        rt,
		Policy:         idem.Policy{FailFast: true},
		MaxRequestBody: 16,
		Tenant:         func(r *http.Request) string { return r.Header.Get("X-Tenant") },
	}, p)

	expectType(t, "no key", post(t, srv, "", "x"), 400, base, httpidem.ProblemMissingKey, "Idempotency-Key is missing")
	expectType(t, "bad key", post(t, srv, "a,b", "x"), 400, base, httpidem.ProblemMalformedKey, "Idempotency-Key is malformed")
	expectType(t, "huge tenant", post(t, srv, "k", "x", "X-Tenant", strings.Repeat("t", 2000)), 500, base,
		httpidem.ProblemInvalidScope, "Idempotency-Key cannot be scoped to this caller")
	expectType(t, "large body", post(t, srv, "k", strings.Repeat("x", 17)), 413, base, httpidem.ProblemBodyTooLarge, "Request body is too large")

	expect(t, "first", post(t, srv, "k", "x"), http.StatusCreated, false, "")
	expectType(t, "other body", post(t, srv, "k", "y"), 422, base, httpidem.ProblemKeyReused, "Idempotency-Key was used with a different request")

	release := p.Hold()
	owner := make(chan reply, 1)
	go func() { owner <- do(srv, http.MethodPost, "/payments", "k2", "x") }()
	p.WaitStarted(t)
	expectType(t, "in flight", post(t, srv, "k2", "x"), 409, base, httpidem.ProblemInProgress, "A request with this Idempotency-Key is in progress")
	release()
	idemtest.Recv(t, owner)

	panicky, _ := serve(t, httpidem.Options{}, http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("bug") }))
	expectType(t, "panic", post(t, panicky, "k", "x"), 500, base, httpidem.ProblemRequestFailed, "Request failed")

	fp := func(*http.Request, []byte) ([]byte, error) { return nil, errors.New("no") }
	unfingerprinted, _ := serve(t, httpidem.Options{Fingerprint: fp}, p)
	expectType(t, "fingerprint", post(t, unfingerprinted, "k", "x"), 400, base, httpidem.ProblemFingerprintFailed, "Request could not be fingerprinted")

	closed, mw := serve(t, httpidem.Options{}, p)
	_ = mw.Close(bg)
	expectType(t, "closed", post(t, closed, "k", "x"), 503, base, httpidem.ProblemUnavailable, "Service temporarily unavailable")
}

// errReader is a request body whose reading fails.
type errReader struct{}

func (errReader) Read([]byte) (int, error) { return 0, errors.New("connection reset") }

// A body that cannot be read is its own problem.
func TestUnreadableBodyProblem(t *testing.T) {
	mw := newMiddleware(t, httpidem.Options{})
	h := mw.Handler(newPayments())
	req := httptest.NewRequest(http.MethodPost, "/payments", io.NopCloser(errReader{}))
	req.Header.Set(httpidem.HeaderKey, "k")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	resp := w.Result()
	body, _ := io.ReadAll(resp.Body)
	r := reply{status: resp.StatusCode, header: resp.Header, body: string(body)}
	expectType(t, "unreadable", r, 400, httpidem.DefaultDocsURL, httpidem.ProblemBodyUnreadable, "Request body could not be read")
}

// DocsURL replaces the base of every type URI, for WriteProblem whether it
// is the default OnError or called by a custom one.
func TestDocsURL(t *testing.T) {
	const base = "https://api.example.com/problems/"
	p := newPayments()
	srv, _ := serve(t, httpidem.Options{DocsURL: base}, p)
	expectType(t, "default OnError", post(t, srv, "", "x"), 400, base, httpidem.ProblemMissingKey, "Idempotency-Key is missing")

	wrapped := func(w http.ResponseWriter, r *http.Request, status int, err error) {
		w.Header().Set("X-Request-Id", "r-1")
		httpidem.WriteProblem(w, r, status, err)
	}
	srv2, _ := serve(t, httpidem.Options{DocsURL: base, OnError: wrapped}, p)
	r := post(t, srv2, "", "x")
	expectType(t, "custom OnError", r, 400, base, httpidem.ProblemMissingKey, "Idempotency-Key is missing")
	if r.header.Get("X-Request-Id") != "r-1" {
		t.Fatalf("headers %v", r.header)
	}
}

// An error the middleware does not produce: type about:blank, the status's
// RFC 9110 name as the title, no Link.
func TestProblemStatusNames(t *testing.T) {
	for status, title := range map[int]string{
		http.StatusUnprocessableEntity:   "Unprocessable Content",
		http.StatusRequestEntityTooLarge: "Content Too Large",
		http.StatusTeapot:                "I'm a teapot",
		499:                              "Error",
	} {
		w := httptest.NewRecorder()
		httpidem.WriteProblem(w, nil, status, errors.New("the application's own"))
		var p problemDoc
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		if w.Code != status || p.Type != "about:blank" || p.Title != title || p.Status != status ||
			p.Detail != "the application's own" || w.Header().Get("Link") != "" {
			t.Errorf("%d: %d %+v Link %q; want about:blank titled %q", status, w.Code, p, w.Header().Get("Link"), title)
		}
	}
}

// A Tenant that makes the key invalid is the service's problem: the 500's
// detail is fixed, and shows neither the tenant nor the internal key, which
// are logged instead. Nor does the error a custom OnError is given.
func TestInvalidScopeDetailHidesTenant(t *testing.T) {
	var logs logBuffer
	tenant := func(*http.Request) string { return "internal-acct-7731:" + strings.Repeat("x", 1100) }
	srv, _ := serve(t, httpidem.Options{Logger: logs.logger(), Tenant: tenant}, newPayments())
	r := post(t, srv, "k", "x")
	expectType(t, "invalid scope", r, 500, httpidem.DefaultDocsURL, httpidem.ProblemInvalidScope, "Idempotency-Key cannot be scoped to this caller")
	if out := logs.String(); !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "internal-acct-7731") {
		t.Fatalf("the tenant was not logged:\n%s", out)
	}
	verbatim := func(w http.ResponseWriter, r *http.Request, status int, err error) {
		http.Error(w, err.Error(), status)
	}
	custom, _ := serve(t, httpidem.Options{Tenant: tenant, OnError: verbatim}, newPayments())
	for what, r := range map[string]reply{"WriteProblem": r, "custom OnError": post(t, custom, "k", "x")} {
		if r.status != http.StatusInternalServerError || strings.Contains(r.body, "internal-acct-7731") || strings.Contains(r.body, "ff:idemp") {
			t.Fatalf("%s: %d shows the tenant or the internal key: %s", what, r.status, r.body)
		}
	}
}

// The 409 of a request whose key is in flight promises the first response
// only if it is stored: a streamed one never is, and the retry then runs.
func TestInProgressDetailDoesNotPromiseAStream(t *testing.T) {
	rt := idemtest.Runtime(t, idem.Options{})
	s := newStreamer("text/event-stream", flushes["http.Flusher"])
	srv, _ := serve(t, httpidem.Options{Runtime: rt, Policy: idem.Policy{FailFast: true}}, s)
	defer func() { // let the runs end, should the test fail before it does
		s.release <- struct{}{}
		s.release <- struct{}{}
	}()
	body := bufio.NewReader(open(t, srv, "k").Body)
	event(t, body)
	r := call(t, srv, http.MethodPost, "/events", "k", "subscribe")
	expectProblem(t, "in flight", r, http.StatusConflict)
	var p problemDoc
	_ = json.Unmarshal([]byte(r.body), &p)
	if !strings.Contains(p.Detail, "once it is stored") || !strings.Contains(p.Detail, "streamed response never is") {
		t.Fatalf("detail %q", p.Detail)
	}
	s.release <- struct{}{}
	event(t, body)
	s.release <- struct{}{} // for the retry's run
	expect(t, "retry runs its own stream", call(t, srv, http.MethodPost, "/events", "k", "subscribe"), http.StatusOK, false,
		"data: one (run 2)\n\ndata: two (run 2)\n\n")
}
