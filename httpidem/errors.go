package httpidem

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/idemrt/idem"
)

// Errors given to Options.OnError (with the status code the middleware
// chose); test for them with errors.Is. The runtime's errors come through as
// they are: idem.ErrConflict (409), idem.ErrFingerprintMismatch (422),
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
	// ErrInvalidScope: Options.Tenant returned a scope a key cannot have
	// (over MaxTenantLen bytes, or holding a control character): a
	// misconfiguration of the service, not the client's fault (500). The
	// handler did not run; the tenant is logged, never shown.
	ErrInvalidScope = errors.New("httpidem: Options.Tenant returned an invalid scope")
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

// unstored is a response that was produced but not kept (a status
// StoreStatus refuses, NoStore, a route miss, a body over MaxStoredBody, a
// stream). It reaches idem.Do as a transient error, so the key is released;
// the owner still sends the response, which its attempt holds (a stream
// has been sent already).
type unstored struct {
	status int
	reason string
}

func (e *unstored) Error() string {
	return fmt.Sprintf("httpidem: response with status %d not stored: %s", e.status, e.reason)
}
