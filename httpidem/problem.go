package httpidem

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/idemrt/idem"
)

// DefaultDocsURL is the default Options.DocsURL: the "Problems" section
// of this package's docs/http.md, which has a heading (an anchor) per
// problem name.
const DefaultDocsURL = "https://github.com/idemrt/idem/blob/main/docs/http.md#"

// Problem names. The type URI of each problem the middleware answers with
// is Options.DocsURL followed by its name, so by default it links to the
// problem's documentation. The names do not change: clients may match on
// them.
const (
	// ProblemMissingKey (400): the request has no Idempotency-Key header.
	ProblemMissingKey = "missing-key"
	// ProblemMalformedKey (400): the header is empty, repeated, too long or
	// holds characters a key may not; see [ParseKey].
	ProblemMalformedKey = "malformed-key"
	// ProblemInvalidScope (500): Options.Tenant returned a scope a key
	// cannot have (over MaxTenantLen bytes, or holding a control
	// character): the service's misconfiguration, not the client's. The
	// detail is fixed: the tenant is logged, not shown.
	ProblemInvalidScope = "invalid-scope"
	// ProblemBodyTooLarge (413): the body is over Options.MaxRequestBody.
	ProblemBodyTooLarge = "body-too-large"
	// ProblemBodyUnreadable (400): reading the body failed.
	ProblemBodyUnreadable = "body-unreadable"
	// ProblemFingerprintFailed (400): Options.Fingerprint returned an
	// error.
	ProblemFingerprintFailed = "fingerprint-failed"
	// ProblemInProgress (409): a request with the key is still running
	// (past Options.Settle, or at once with Options.FailFast). The response
	// has Retry-After.
	ProblemInProgress = "in-progress"
	// ProblemKeyReused (422): the key was used with another request (see
	// Options.Fingerprint).
	ProblemKeyReused = "key-reused"
	// ProblemUnavailable (503): the runtime is closed, overloaded, or its
	// store is down, or the request's context ended before it ran; its
	// handler did not run. The response has Retry-After.
	ProblemUnavailable = "unavailable"
	// ProblemRequestFailed (500): the handler (or Options.Tenant or
	// Fingerprint) panicked, or its run lost the key; nothing was stored,
	// so a retry is safe.
	ProblemRequestFailed = "request-failed"
)

// kind is one problem: its name, title, and its detail ("" for the
// error's own message).
type kind struct {
	name, title, detail string
}

var (
	kindMissingKey   = &kind{ProblemMissingKey, "Idempotency-Key is missing", ""}
	kindMalformedKey = &kind{ProblemMalformedKey, "Idempotency-Key is malformed", ""}
	kindInvalidScope = &kind{ProblemInvalidScope, "Idempotency-Key cannot be scoped to this caller",
		"The service could not scope this key to the caller; the service logged why. Retrying does not help."}
	kindBodyTooLarge = &kind{ProblemBodyTooLarge, "Request body is too large", ""}
	kindBodyRead     = &kind{ProblemBodyUnreadable, "Request body could not be read", ""}
	kindFingerprint  = &kind{ProblemFingerprintFailed, "Request could not be fingerprinted", ""}
	kindInProgress   = &kind{ProblemInProgress, "A request with this Idempotency-Key is in progress",
		"The first request with this key is still running. Retry the same request with the same key after Retry-After seconds: you get its response once it is stored, or your request runs if that response is not kept (a streamed response never is)."}
	kindKeyReused = &kind{ProblemKeyReused, "Idempotency-Key was used with a different request",
		"This key was first used with another request (method, path, query or body). Use a new key for a new request."}
	kindUnavailable = &kind{ProblemUnavailable, "Service temporarily unavailable",
		"The request could not be processed now; retry it later with the same Idempotency-Key."}
	kindFailed = &kind{ProblemRequestFailed, "Request failed",
		"The request failed and its response was not recorded: retrying it with the same Idempotency-Key is safe."}
)

// kindOf returns the problem of err, answered with status; nil for an
// error the middleware does not produce with that status.
func kindOf(err error, status int) *kind {
	var pe *idem.PanicError
	switch {
	case errors.Is(err, ErrMissingKey):
		return kindMissingKey
	case errors.Is(err, ErrMalformedKey):
		return kindMalformedKey
	case errors.Is(err, ErrInvalidScope):
		return kindInvalidScope
	case errors.Is(err, ErrBodyTooLarge):
		return kindBodyTooLarge
	case errors.Is(err, ErrBodyRead):
		return kindBodyRead
	case errors.Is(err, ErrFingerprint):
		return kindFingerprint
	case errors.Is(err, idem.ErrConflict):
		return kindInProgress
	case errors.Is(err, idem.ErrFingerprintMismatch):
		return kindKeyReused
	case errors.As(err, &pe), errors.Is(err, idem.ErrLeaseLost):
		return kindFailed
	}
	switch status {
	case http.StatusServiceUnavailable:
		return kindUnavailable
	case http.StatusInternalServerError:
		return kindFailed
	}
	return nil
}

// problem is an RFC 9457 problem document, the error format the IETF draft
// uses in its examples.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// docsKey carries the Options.DocsURL of the middleware answering a request
// in the context of the request it hands Options.OnError.
type docsKey struct{}

// WriteProblem is the default Options.OnError: it answers with status and an
// application/problem+json body (RFC 9457).
//
//   - type: the problem's type URI, DocsURL + its name (see
//     [ProblemMissingKey] and the others), where DocsURL is the
//     Options.DocsURL of the middleware that answers r ([DefaultDocsURL]
//     when r did not come from one). The same URI goes in a Link header
//     with rel="describedby".
//   - title: what went wrong, specific to the problem ("Idempotency-Key is
//     missing").
//   - detail: for client errors (4xx), err's message, which says what to
//     fix; for 409, 422, an invalid scope and server errors, a fixed text
//     that says what to do and leaks nothing internal.
//
// 409 and 503 answers have Retry-After: 1 unless the header is set. An
// error the middleware does not produce gets the type "about:blank" and the
// status's RFC 9110 name as its title ("Unprocessable Content" for 422,
// "Content Too Large" for 413), and no Link.
func WriteProblem(w http.ResponseWriter, r *http.Request, status int, err error) {
	h := w.Header()
	p := problem{Type: "about:blank", Title: statusName(status), Status: status}
	if k := kindOf(err, status); k != nil {
		base := DefaultDocsURL
		if r != nil {
			if b, ok := r.Context().Value(docsKey{}).(string); ok {
				base = b
			}
		}
		p.Type, p.Title, p.Detail = base+k.name, k.title, k.detail
		h.Add("Link", "<"+p.Type+`>; rel="describedby"`)
	}
	if p.Detail == "" {
		switch {
		case status >= 500 || err == nil:
			p.Detail = p.Title + "."
		default:
			p.Detail = err.Error()
		}
	}
	if (status == http.StatusConflict || status == http.StatusServiceUnavailable) && h.Get("Retry-After") == "" {
		h.Set("Retry-After", retryAfter)
	}
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Length")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(p)
}

// retryAfter is the Retry-After of a 409 or 503, in seconds. One second:
// the retry either finds the response stored, or waits for it (up to
// Options.Settle) where it would otherwise have slept; the holder's lease
// is no estimate of when its response comes (it is renewed while the
// handler runs).
const retryAfter = "1"

// statusName returns the reason phrase of status, in RFC 9110's current
// wording where it renamed one that net/http still uses.
func statusName(status int) string {
	switch status {
	case http.StatusRequestEntityTooLarge:
		return "Content Too Large"
	case http.StatusRequestURITooLong:
		return "URI Too Long"
	case http.StatusRequestedRangeNotSatisfiable:
		return "Range Not Satisfiable"
	case http.StatusUnprocessableEntity:
		return "Unprocessable Content"
	}
	if s := http.StatusText(status); s != "" {
		return s
	}
	return "Error"
}

// withDocs returns r with base in its context, for WriteProblem.
func withDocs(r *http.Request, base string) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), docsKey{}, base))
}
