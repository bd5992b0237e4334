package httpidem_test

import (
	"errors"
	"fmt"
	"net/http"
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
		"a cookie name with a space":        {CredentialCookies: []string{"s id"}},
		"an empty cookie name":              {CredentialCookies: []string{""}},
		"Fingerprint and its headers":       {Fingerprint: fp, FingerprintHeaders: []string{"Content-Type"}},
		"a header name with a colon":        {FingerprintHeaders: []string{"Content-Type:"}},
		"FailFast and Settle":               {FailFast: true, Settle: 1},
		"a DocsURL with a space":            {DocsURL: "https://example.com/a b#"},
		"a DocsURL with >":                  {DocsURL: "https://example.com/>#"},
		"a DocsURL with a newline":          {DocsURL: "https://example.com/\r\nX: y"},
	} {
		if _, err := httpidem.New(o); !errors.Is(err, idem.ErrInvalidArgument) {
			t.Errorf("%s: %v, want ErrInvalidArgument", what, err)
		}
	}
}
