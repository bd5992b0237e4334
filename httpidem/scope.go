package httpidem

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"net/http"
	"strings"
)

// A key's scope is the namespace of its idem key: requests in two scopes
// never share a key, so never see each other's responses.

// Scope returns the scope the middleware gives r's key: Options.Tenant's
// answer, "" with Options.SharedScope, or by default a digest of the
// credentials r carries (Options.CredentialHeaders and CredentialCookies),
// "" when it carries none. Pass it to [Middleware.Response],
// [Middleware.State] and [Middleware.Forget] to reach what r's key holds,
// from a handler that sees the caller's request (a status endpoint, say).
// It calls Options.Tenant, if set, and lets a panic of it through.
func (m *Middleware) Scope(r *http.Request) string {
	scope, _ := m.scopeOf(r)
	return scope
}

// scopeOf returns the scope of r's key, and whether r is in the shared
// anonymous scope by default (no Tenant, no SharedScope, no credentials).
func (m *Middleware) scopeOf(r *http.Request) (scope string, anonymous bool) {
	switch {
	case m.o.Tenant != nil:
		return m.o.Tenant(r), false
	case m.o.SharedScope:
		return "", false
	}
	scope = credentialScope(r, m.o.CredentialHeaders, m.o.CredentialCookies)
	return scope, scope == ""
}

// warnAnonymous logs, once per middleware, that a keyed request carried
// none of the credentials that scope keys.
func (m *Middleware) warnAnonymous(r *http.Request) {
	m.anonymous.Do(func() {
		m.o.Logger.Warn("httpidem: a request with an Idempotency-Key carries no credential, so it runs in the shared anonymous scope, "+
			"where any caller who sends the same key gets the response stored for it; name the header or cookie callers "+
			"authenticate with in Options.CredentialHeaders or CredentialCookies, set Options.Tenant from the authenticated principal, "+
			"or set Options.SharedScope for a public endpoint (logged once)",
			"method", r.Method, "path", r.URL.Path,
			"credential_headers", m.o.CredentialHeaders, "credential_cookies", m.o.CredentialCookies)
	})
}

// credentialScope digests the credentials r carries: the values of the
// headers named in headers (canonical names) and the cookies named in
// cookies. A request without any is in the anonymous scope, "". The
// digest is one-way, so the key (which may be logged, or seen in the
// store) does not reveal the credentials; 128 bits of SHA-256 are plenty
// to keep callers apart.
//
// The fields are written as before X-Api-Key and cookies counted, so that a
// request with an Authorization alone (in its usual spelling) keeps the
// scope it had.
func credentialScope(r *http.Request, headers, cookies []string) string {
	h := sha256.New()
	n := 0
	for _, name := range headers {
		for _, v := range r.Header[name] {
			if name == "Authorization" || name == "Proxy-Authorization" {
				v = foldScheme(v)
			}
			field(h, strings.ToLower(name))
			field(h, v)
			n++
		}
	}
	for _, name := range cookies {
		for _, c := range r.CookiesNamed(name) {
			field(h, "cookie")
			field(h, name)
			field(h, c.Value)
			n++
		}
	}
	if n == 0 {
		return ""
	}
	return "caller-" + hex.EncodeToString(h.Sum(nil)[:16])
}

// foldScheme returns credentials (an Authorization value) with its
// auth-scheme, which is case-insensitive (RFC 9110 §11.1), in one
// spelling: its first letter upper case, the rest lower case ("Bearer",
// "Basic", "Digest"), the spelling clients send, so that the digests of
// keys stored before the scheme was folded stay the same. ASCII letters
// only; the credentials after the scheme are case-sensitive and kept.
func foldScheme(credentials string) string {
	scheme, _, _ := strings.Cut(credentials, " ")
	folded := []byte(scheme)
	for i, c := range folded {
		switch {
		case i == 0 && 'a' <= c && c <= 'z':
			folded[i] = c - 'a' + 'A'
		case i > 0 && 'A' <= c && c <= 'Z':
			folded[i] = c - 'A' + 'a'
		}
	}
	if string(folded) == scheme {
		return credentials
	}
	return string(folded) + credentials[len(scheme):]
}

// field writes s to h length-prefixed, so that no two lists of fields
// write the same bytes.
func field(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}
