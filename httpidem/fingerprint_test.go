package httpidem_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/idemrt/idem/httpidem"
)

// The fingerprint: what tells two requests with one key apart. By default
// it is byte-exact; Options.Fingerprint makes equivalent requests equal, and
// Options.FingerprintHeaders adds headers to the default.

// canonical is a fingerprint under which reordered query parameters and
// re-serialised JSON are the same request.
func canonical(r *http.Request, body []byte) ([]byte, error) {
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, err
	}
	b, err := json.Marshal(v) // object keys sorted, no spaces
	if err != nil {
		return nil, err
	}
	return bytes.Join([][]byte{[]byte(r.Method), []byte(r.URL.Path), []byte(r.URL.Query().Encode()), b}, []byte{0}), nil
}

var (
	original   = struct{ path, body string }{"/payments?b=2&a=1", `{"amount":10,"currency":"EUR"}`}
	equivalent = struct{ path, body string }{"/payments?a=1&b=2", "{\n  \"currency\": \"EUR\",\n  \"amount\": 10\n}"}
)

// With a canonical Fingerprint, a retry that spells the same request
// differently gets the stored response, not 422; another request still gets
// 422.
func TestCustomFingerprintAcceptsEquivalentRequests(t *testing.T) {
	p := newPayments()
	srv, _ := serve(t, httpidem.Options{Fingerprint: canonical}, p)
	first := call(t, srv, http.MethodPost, original.path, "k", original.body)
	expect(t, "first", first, http.StatusCreated, false, "")
	expect(t, "equivalent", call(t, srv, http.MethodPost, equivalent.path, "k", equivalent.body), http.StatusCreated, true, first.body)
	expectProblem(t, "another amount", call(t, srv, http.MethodPost, original.path, "k", `{"amount":99,"currency":"EUR"}`), http.StatusUnprocessableEntity)
	expectProblem(t, "another query", call(t, srv, http.MethodPost, "/payments?a=1&b=3", "k", original.body), http.StatusUnprocessableEntity)
	if p.runs.Load() != 1 {
		t.Fatalf("%d runs, want 1", p.runs.Load())
	}
}

// The default fingerprint is byte for byte: the same equivalent request is
// a 422 without a custom Fingerprint.
func TestDefaultFingerprintIsExact(t *testing.T) {
	p := newPayments()
	srv, _ := serve(t, httpidem.Options{}, p)
	expect(t, "first", call(t, srv, http.MethodPost, original.path, "k", original.body), http.StatusCreated, false, "")
	expectProblem(t, "equivalent", call(t, srv, http.MethodPost, equivalent.path, "k", equivalent.body), http.StatusUnprocessableEntity)
}

// A Fingerprint error is a 400 that wraps it (ErrFingerprint); the handler
// does not run and the key stays free.
func TestFingerprintErrorIs400(t *testing.T) {
	p := newPayments()
	var got error
	onError := func(w http.ResponseWriter, r *http.Request, status int, err error) {
		got = err
		httpidem.WriteProblem(w, r, status, err)
	}
	srv, _ := serve(t, httpidem.Options{Fingerprint: canonical, OnError: onError}, p)
	r := post(t, srv, "k", "{not json")
	expectProblem(t, "not JSON", r, http.StatusBadRequest)
	var syntax *json.SyntaxError
	if !errors.Is(got, httpidem.ErrFingerprint) || !errors.As(got, &syntax) {
		t.Fatalf("OnError got %v; want ErrFingerprint wrapping the JSON error", got)
	}
	if !strings.Contains(r.body, httpidem.ProblemFingerprintFailed) {
		t.Fatalf("problem %s", r.body)
	}
	expect(t, "corrected", post(t, srv, "k", `{"amount":1}`), http.StatusCreated, false, "")
	if p.runs.Load() != 1 {
		t.Fatalf("%d runs, want 1", p.runs.Load())
	}
}

// FingerprintHeaders adds headers to the default fingerprint: the same body
// under another Content-Type is another request (422). Without it, the
// header does not count.
func TestFingerprintHeaders(t *testing.T) {
	p := newPayments()
	withHeader, _ := serve(t, httpidem.Options{FingerprintHeaders: []string{"content-type"}}, p)
	without, _ := serve(t, httpidem.Options{}, p)
	for _, c := range []struct {
		what     string
		srv      *httptest.Server
		status   int
		replayed bool
	}{
		{"with FingerprintHeaders", withHeader, http.StatusUnprocessableEntity, false},
		{"without", without, http.StatusCreated, true},
	} {
		expect(t, c.what+": JSON", post(t, c.srv, "k", "a=1", "Content-Type", "application/json"), http.StatusCreated, false, "")
		expect(t, c.what+": JSON again", post(t, c.srv, "k", "a=1", "Content-Type", "application/json"), http.StatusCreated, true, "")
		r := post(t, c.srv, "k", "a=1", "Content-Type", "application/x-www-form-urlencoded")
		if r.status != c.status || r.replayed != c.replayed {
			t.Fatalf("%s: a form: %d replayed %v, want %d replayed %v", c.what, r.status, r.replayed, c.status, c.replayed)
		}
	}
}
