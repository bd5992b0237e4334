package httpidem_test

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
)

// Scopes: by default a key belongs to the caller that sent it (a digest of
// its credentials), so one caller never gets another's response.

// session answers with a body and a Set-Cookie naming the caller and the
// run: what must never reach another caller.
func session(runs *atomic.Int32) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		http.SetCookie(w, &http.Cookie{Name: "receipt", Value: fmt.Sprint("run", n)})
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, "run %d for %q", n, r.Header.Get("Authorization"))
	})
}

// The case: two callers, one key, one body, another Authorization.
// Both run; neither gets the other's body or Set-Cookie. Each caller's
// retry gets its own response back.
func TestCredentialsScopeKeys(t *testing.T) {
	var runs atomic.Int32
	srv, _ := serve(t, httpidem.Options{}, session(&runs))
	alice := post(t, srv, "k", "pay 10", "Authorization", "Bearer alice")
	bob := post(t, srv, "k", "pay 10", "Authorization", "Bearer bob")
	expect(t, "alice", alice, http.StatusCreated, false, `run 1 for "Bearer alice"`)
	expect(t, "bob", bob, http.StatusCreated, false, `run 2 for "Bearer bob"`)
	if c := bob.header.Get("Set-Cookie"); c != "receipt=run2" {
		t.Fatalf("bob got Set-Cookie %q", c)
	}
	expect(t, "alice's retry", post(t, srv, "k", "pay 10", "Authorization", "Bearer alice"), http.StatusCreated, true, alice.body)
	bobAgain := post(t, srv, "k", "pay 10", "Authorization", "Bearer bob")
	expect(t, "bob's retry", bobAgain, http.StatusCreated, true, bob.body)
	if c := bobAgain.header.Get("Set-Cookie"); c != "receipt=run2" {
		t.Fatalf("bob's retry got Set-Cookie %q", c)
	}
	// No credentials: the anonymous scope, apart from both.
	expect(t, "anonymous", post(t, srv, "k", "pay 10"), http.StatusCreated, false, `run 3 for ""`)
	if runs.Load() != 3 {
		t.Fatalf("%d runs, want 3", runs.Load())
	}
}

// A session cookie named in CredentialCookies scopes keys too; other
// cookies do not.
func TestSessionCookieScopesKeys(t *testing.T) {
	var runs atomic.Int32
	srv, _ := serve(t, httpidem.Options{CredentialCookies: []string{"sid"}}, session(&runs))
	first := post(t, srv, "k", "x", "Cookie", "sid=one; theme=dark")
	expect(t, "session one", first, http.StatusCreated, false, "")
	expect(t, "session two", post(t, srv, "k", "x", "Cookie", "sid=two; theme=dark"), http.StatusCreated, false, "")
	expect(t, "session one, other cookies", post(t, srv, "k", "x", "Cookie", "theme=light; sid=one"), http.StatusCreated, true, first.body)
	if runs.Load() != 2 {
		t.Fatalf("%d runs, want 2", runs.Load())
	}
}

// SharedScope opts out: every request with the key shares one scope,
// whatever its credentials (for public endpoints).
func TestSharedScope(t *testing.T) {
	var runs atomic.Int32
	srv, _ := serve(t, httpidem.Options{SharedScope: true}, session(&runs))
	first := post(t, srv, "k", "x", "Authorization", "Bearer alice")
	expect(t, "first", first, http.StatusCreated, false, "")
	expect(t, "another caller", post(t, srv, "k", "x", "Authorization", "Bearer bob"), http.StatusCreated, true, first.body)
	if runs.Load() != 1 {
		t.Fatalf("%d runs, want 1", runs.Load())
	}
}

// Tenant, when set, is the scope: credentials do not count (a rotated token
// of one account is the same tenant).
func TestTenantReplacesCredentialScope(t *testing.T) {
	var runs atomic.Int32
	tenant := func(r *http.Request) string { return r.Header.Get("X-Account") }
	srv, _ := serve(t, httpidem.Options{Tenant: tenant}, session(&runs))
	first := post(t, srv, "k", "x", "X-Account", "acme", "Authorization", "Bearer old")
	expect(t, "old token", first, http.StatusCreated, false, "")
	expect(t, "rotated token", post(t, srv, "k", "x", "X-Account", "acme", "Authorization", "Bearer new"), http.StatusCreated, true, first.body)
	if runs.Load() != 1 {
		t.Fatalf("%d runs, want 1", runs.Load())
	}
}

// Options that exclude each other, or names that cannot be what they
// name, are refused by New.
func TestScopeAndFingerprintOptions(t *testing.T) {
	tenant := func(*http.Request) string { return "" }
	fp := func(*http.Request, []byte) ([]byte, error) { return nil, nil }
	for what, o := range map[string]httpidem.Options{
		"Tenant and SharedScope":            {Tenant: tenant, SharedScope: true},
		"CredentialCookies and Tenant":      {Tenant: tenant, CredentialCookies: []string{"sid"}},
		"CredentialCookies and SharedScope": {SharedScope: true, CredentialCookies: []string{"sid"}},
		"CredentialHeaders and Tenant":      {Tenant: tenant, CredentialHeaders: []string{"X-Consumer-Id"}},
		"CredentialHeaders and SharedScope": {SharedScope: true, CredentialHeaders: []string{"X-Consumer-Id"}},
		"a credential header with a colon":  {CredentialHeaders: []string{"X-User:"}},
		"Cookie as a credential header":     {CredentialHeaders: []string{"cookie"}},
		"a cookie name with a space":        {CredentialCookies: []string{"s id"}},
		"an empty cookie name":              {CredentialCookies: []string{""}},
		"Fingerprint and its headers":       {Fingerprint: fp, FingerprintHeaders: []string{"Content-Type"}},
		"a header name with a colon":        {FingerprintHeaders: []string{"Content-Type:"}},
		"FailFast and Settle":               {Policy: idem.Policy{FailFast: true, Settle: 1}},
		"a DocsURL with a space":            {DocsURL: "https://example.com/a b#"},
		"a DocsURL with >":                  {DocsURL: "https://example.com/>#"},
		"a DocsURL with a newline":          {DocsURL: "https://example.com/\r\nX: y"},
	} {
		if _, err := httpidem.New(o); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", what, err)
		}
	}
}

// Callers that authenticate with an API-key header, not Authorization, get
// scopes of their own by default (X-Api-Key); a gateway's identity header
// named in CredentialHeaders scopes keys too.
func TestAPIKeyCallersGetScopesOfTheirOwn(t *testing.T) {
	var runs atomic.Int32
	srv, _ := serve(t, httpidem.Options{}, session(&runs))
	alice := post(t, srv, "order-1", "x", "X-Api-Key", "alice-key")
	expect(t, "alice", alice, http.StatusCreated, false, "")
	bob := post(t, srv, "order-1", "x", "X-Api-Key", "bob-key")
	expect(t, "bob", bob, http.StatusCreated, false, "")
	if bob.header.Get("Set-Cookie") == alice.header.Get("Set-Cookie") {
		t.Fatalf("bob got alice's Set-Cookie %q", bob.header.Get("Set-Cookie"))
	}
	expect(t, "alice's retry", post(t, srv, "order-1", "x", "X-Api-Key", "alice-key"), http.StatusCreated, true, alice.body)

	var gwRuns atomic.Int32
	gateway, _ := serve(t, httpidem.Options{CredentialHeaders: []string{"x-consumer-id"}}, session(&gwRuns))
	first := post(t, gateway, "k", "x", "X-Consumer-Id", "acme")
	expect(t, "acme", first, http.StatusCreated, false, "")
	expect(t, "globex", post(t, gateway, "k", "x", "X-Consumer-Id", "globex"), http.StatusCreated, false, "")
	expect(t, "acme again", post(t, gateway, "k", "x", "X-Consumer-Id", "acme"), http.StatusCreated, true, first.body)
	if runs.Load() != 2 || gwRuns.Load() != 2 {
		t.Fatalf("%d and %d runs, want 2 and 2", runs.Load(), gwRuns.Load())
	}
}

// A keyed request without any configured credential runs in the shared
// anonymous scope (public webhook receivers rely on it), and the
// middleware warns about it once, naming the options; not with Tenant or
// SharedScope, nor for requests with credentials.
func TestAnonymousScopeWarnsOnce(t *testing.T) {
	const warning = "shared anonymous scope"
	var logs logBuffer
	var runs atomic.Int32
	srv, _ := serve(t, httpidem.Options{Logger: logs.logger()}, session(&runs))
	post(t, srv, "k1", "x", "Authorization", "Bearer alice")
	if strings.Contains(logs.String(), warning) {
		t.Fatalf("warned about a request with credentials:\n%s", logs.String())
	}
	first := post(t, srv, "k2", "x")
	expect(t, "anonymous", first, http.StatusCreated, false, "")
	expect(t, "anonymous, another caller", post(t, srv, "k2", "x"), http.StatusCreated, true, first.body)
	post(t, srv, "k3", "x")
	out := logs.String()
	if strings.Count(out, warning) != 1 || !strings.Contains(out, "level=WARN") ||
		!strings.Contains(out, "CredentialHeaders") || !strings.Contains(out, "Tenant") || !strings.Contains(out, "SharedScope") {
		t.Fatalf("want one warning naming the options:\n%s", out)
	}
	for what, o := range map[string]httpidem.Options{
		"SharedScope": {SharedScope: true},
		"Tenant":      {Tenant: func(*http.Request) string { return "acme" }},
	} {
		var quiet logBuffer
		o.Logger = quiet.logger()
		srv, _ := serve(t, o, session(&runs))
		post(t, srv, "k", "x")
		if quiet.String() != "" {
			t.Fatalf("%s: logged %s", what, quiet.String())
		}
	}
}

// The auth-scheme is case-insensitive (RFC 9110 §11.1): "Bearer t",
// "bearer t" and "BEARER t" are one caller. The credentials after it are
// not: "Bearer T" is another.
func TestAuthSchemeIsCaseInsensitive(t *testing.T) {
	var runs atomic.Int32
	srv, _ := serve(t, httpidem.Options{}, session(&runs))
	first := post(t, srv, "k", "x", "Authorization", "Bearer tok")
	expect(t, "Bearer", first, http.StatusCreated, false, "")
	for _, auth := range []string{"bearer tok", "BEARER tok", "bEaReR tok"} {
		expect(t, auth, post(t, srv, "k", "x", "Authorization", auth), http.StatusCreated, true, first.body)
	}
	expect(t, "other credentials", post(t, srv, "k", "x", "Authorization", "Bearer TOK"), http.StatusCreated, false, "")
	if runs.Load() != 2 {
		t.Fatalf("%d runs, want 2", runs.Load())
	}
}

// Keys stored before X-Api-Key counted and the scheme was folded keep their
// scope: a request with an Authorization alone, in its usual spelling, has
// the digest it had.
func TestAuthorizationScopeUnchanged(t *testing.T) {
	mw := newMiddleware(t, httpidem.Options{})
	h := sha256.New()
	for _, f := range []string{"authorization", "Bearer alice"} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write([]byte(f))
	}
	want := "caller-" + hex.EncodeToString(h.Sum(nil)[:16])
	r := httptest.NewRequest(http.MethodPost, "/", nil)
	r.Header.Set("Authorization", "Bearer alice")
	if got := mw.Scope(r); got != want {
		t.Fatalf("scope %q, want %q", got, want)
	}
}

// Signed requests (AWS SigV4 here; Digest and Hawk alike) carry another
// Authorization on every attempt, so each retry would be a caller of its
// own and run again: set Tenant from the authenticated principal (the
// signature's access key, once verified), as docs/http.md says.
func TestSignedRequestsScopedByTenant(t *testing.T) {
	p := newPayments()
	accessKey := func(r *http.Request) string {
		// In a service: the principal the signature verification found.
		_, cred, _ := strings.Cut(r.Header.Get("Authorization"), "Credential=")
		id, _, _ := strings.Cut(cred, "/")
		return id
	}
	srv, _ := serve(t, httpidem.Options{Tenant: accessKey}, p)
	for i := range 3 {
		sig := fmt.Sprintf("AWS4-HMAC-SHA256 Credential=AKID/20260101/eu-west-1/execute-api/aws4_request, "+
			"SignedHeaders=host;x-amz-date, Signature=%064d", i)
		expect(t, fmt.Sprint("attempt ", i), post(t, srv, "k", "pay 10", "Authorization", sig), http.StatusCreated, i > 0, "")
	}
	if p.runs.Load() != 1 {
		t.Fatalf("%d runs, want 1", p.runs.Load())
	}
}
