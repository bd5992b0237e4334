package httpidem

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/idemrt/idem"
)

// Errors given to Options.OnError (with the status code the middleware
// chose); test for them with errors.Is. The runtime's errors come through as
// they are: idem.ErrConflict (409), idem.ErrFingerprintMismatch (422),
// idem.ErrInvalidKey (400: a tenant that makes the key invalid),
// idem.ErrOverloaded, idem.ErrClosed and idem.ErrStoreUnavailable (503),
// *idem.PanicError and idem.ErrLeaseLost (500).
var (
	// ErrMissingKey: a request that needs an Idempotency-Key has none (400).
	ErrMissingKey = errors.New("httpidem: Idempotency-Key header missing")
	// ErrMalformedKey: the Idempotency-Key header is empty, too long, holds
	// characters it may not, or appears more than once (400).
	ErrMalformedKey = errors.New("httpidem: malformed Idempotency-Key")
	// ErrBodyTooLarge: the request body is over Options.MaxRequestBody
	// (413).
	ErrBodyTooLarge = errors.New("httpidem: request body too large")
	// ErrBodyRead: the request body could not be read (400).
	ErrBodyRead = errors.New("httpidem: reading the request body failed")
	// ErrFingerprint: Options.Fingerprint returned an error, which this one
	// wraps (400).
	ErrFingerprint = errors.New("httpidem: fingerprinting the request failed")
)

// StatusFor returns the status code the middleware answers err with. (It is
// the status passed to Options.OnError.)
func StatusFor(err error) int {
	var pe *idem.PanicError
	switch {
	case errors.Is(err, ErrMissingKey), errors.Is(err, ErrMalformedKey),
		errors.Is(err, ErrBodyRead), errors.Is(err, ErrFingerprint), errors.Is(err, idem.ErrInvalidKey):
		return http.StatusBadRequest
	case errors.Is(err, ErrBodyTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, idem.ErrFingerprintMismatch):
		return http.StatusUnprocessableEntity
	case errors.Is(err, idem.ErrConflict):
		return http.StatusConflict
	case errors.As(err, &pe), errors.Is(err, idem.ErrLeaseLost):
		return http.StatusInternalServerError
	case errors.Is(err, idem.ErrOverloaded), errors.Is(err, idem.ErrClosed),
		errors.Is(err, idem.ErrStoreUnavailable),
		errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// problem is an RFC 9457 problem document, the error format the IETF draft
// uses in its examples.
type problem struct {
	Type   string `json:"type"`
	Title  string `json:"title"`
	Status int    `json:"status"`
	Detail string `json:"detail"`
}

// WriteProblem is the default Options.OnError: it answers with status and an
// application/problem+json body (RFC 9457) whose detail says what went
// wrong. Client errors (4xx) carry err's message; server errors carry a
// fixed text, so no internal detail reaches the client. 409 and 503 answers
// have Retry-After: 1 unless the header is set.
func WriteProblem(w http.ResponseWriter, _ *http.Request, status int, err error) {
	detail := ""
	switch status {
	case http.StatusConflict:
		detail = "A request with the same Idempotency-Key is being processed; retry later."
	case http.StatusUnprocessableEntity:
		detail = "The Idempotency-Key was already used with a different request (method, path, tenant or body)."
	case http.StatusServiceUnavailable:
		detail = "The request could not be processed now; retry later."
	case http.StatusInternalServerError:
		detail = "The request failed; it was not recorded, so a retry runs it again."
	default:
		if err != nil {
			detail = err.Error()
		}
	}
	h := w.Header()
	if (status == http.StatusConflict || status == http.StatusServiceUnavailable) && h.Get("Retry-After") == "" {
		h.Set("Retry-After", retryAfter)
	}
	h.Set("Content-Type", "application/problem+json")
	h.Set("Cache-Control", "no-store")
	h.Del("Content-Length")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail})
}

// retryAfter is the Retry-After of a 409 or 503, in seconds. One second:
// the retry either finds the response stored, or waits for it (up to
// Options.Settle) where it would otherwise have slept; the holder's lease
// is no estimate of when its response comes (it is renewed while the
// handler runs).
const retryAfter = "1"

// unstored is a response that was produced but not kept (a status
// StoreStatus refuses, NoStore, a route miss, or a body over
// MaxStoredBody). It reaches idem.Do as a
// transient error, so the key is released, and carries the response to the
// owner, who still sends it.
type unstored struct {
	resp   *response
	reason string
}

func (e *unstored) Error() string {
	return fmt.Sprintf("httpidem: response with status %d not stored: %s", e.resp.Status, e.reason)
}
