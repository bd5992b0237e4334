package httpidem

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"net/http"
)

// A key's scope is the namespace of its idem key: requests in two scopes
// never share a key, so never see each other's responses.

// scopeOf returns the scope of r's key: its tenant (Options.Tenant), one
// shared scope (Options.SharedScope, ""), or by default a digest of its
// credentials.
func (m *Middleware) scopeOf(r *http.Request) string {
	switch {
	case m.o.Tenant != nil:
		return m.o.Tenant(r)
	case m.o.SharedScope:
		return ""
	}
	return credentialScope(r, m.o.CredentialCookies)
}

// credentialScope digests the credentials r carries: its Authorization
// headers and the cookies named in cookies. A request without any is in
// the anonymous scope, "". The digest is one-way, so the key (which may be
// logged, or seen in the store) does not reveal the credentials; 128 bits
// of SHA-256 are plenty to keep callers apart.
func credentialScope(r *http.Request, cookies []string) string {
	h := sha256.New()
	n := 0
	for _, v := range r.Header.Values("Authorization") {
		field(h, "authorization")
		field(h, v)
		n++
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

// field writes s to h length-prefixed, so that no two lists of fields
// write the same bytes.
func field(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}
