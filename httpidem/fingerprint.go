package httpidem

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"strconv"
)

// fingerprintOf returns what ties the key to r: a request with the key
// and another fingerprint gets 422. It is Options.Fingerprint's answer,
// digested, or the default fingerprint.
func (m *Middleware) fingerprintOf(r *http.Request, scope string, body []byte) ([]byte, error) {
	if m.o.Fingerprint == nil {
		return fingerprint(r, scope, body, m.o.FingerprintHeaders), nil
	}
	fp, err := m.o.Fingerprint(r, body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrFingerprint, err)
	}
	// Digested under a prefix of its own: whatever the function returns
	// (even nothing, which idem would take for "no fingerprint, match
	// any"), the record holds 32 bytes that no default fingerprint equals.
	h := sha256.New()
	field(h, "httpidem/custom")
	h.Write(fp)
	return h.Sum(nil), nil
}

// fingerprint digests what makes a request the same request: its method,
// path and query, scope, body, and the values of headers (canonical names,
// in order). Every field is length-prefixed, so no two different requests
// give the same input to the hash. Without headers it is the same digest as
// before headers could be added, so records stored then still match.
func fingerprint(r *http.Request, scope string, body []byte, headers []string) []byte {
	h := sha256.New()
	for _, f := range []string{"httpidem/1", r.Method, r.URL.EscapedPath(), r.URL.RawQuery, scope} {
		field(h, f)
	}
	sum := sha256.Sum256(body)
	h.Write(sum[:])
	for _, name := range headers {
		vs := r.Header[name]
		field(h, name)
		field(h, strconv.Itoa(len(vs)))
		for _, v := range vs {
			field(h, v)
		}
	}
	return h.Sum(nil)
}
