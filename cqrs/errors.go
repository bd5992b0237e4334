package cqrs

import (
	"errors"
	"fmt"

	"github.com/idemrt/idem"
)

// Errors of the bus and of the idempotency behaviour. Test for them with
// errors.Is. The runtime's own errors pass through wrapped: a command whose
// lock is held elsewhere fails with an error that matches idem.ErrConflict
// (an *idem.ConflictError), one whose request id was used by another command
// type with idem.ErrFingerprintMismatch.
var (
	// ErrNoHandler: no handler is registered for the message's type.
	ErrNoHandler = errors.New("cqrs: no handler registered")
	// ErrDuplicateHandler: the type already has a handler.
	ErrDuplicateHandler = errors.New("cqrs: duplicate handler")
	// ErrResultType: Dispatch asked for another result type than the
	// handler's, or a behaviour returned a value of the wrong type.
	ErrResultType = errors.New("cqrs: wrong result type")
	// ErrNoRequestID: a command reached the idempotency behaviour without a
	// request id in its context (see WithRequestID), and the behaviour is not
	// Optional. The handler did not run.
	ErrNoRequestID = errors.New("cqrs: no request id in the context")
	// ErrInvalidRequestID: the request id is too long, not UTF-8, or holds
	// control characters. It also matches idem.ErrInvalidKey.
	ErrInvalidRequestID = errors.New("cqrs: invalid request id")
	// ErrInvalidTenant: the tenant is too long, not UTF-8, or holds control
	// characters. It also matches idem.ErrInvalidKey.
	ErrInvalidTenant = errors.New("cqrs: invalid tenant")
)

// invalidError is a request id or tenant that cannot be part of a key.
type invalidError struct {
	sentinel error // ErrInvalidRequestID or ErrInvalidTenant
	value    string
	reason   string
}

func (e *invalidError) Error() string {
	v := e.value
	if len(v) > 64 {
		v = v[:64] + "..."
	}
	return fmt.Sprintf("%v %q: %s", e.sentinel, v, e.reason)
}

// Is makes errors.Is match the sentinel and idem.ErrInvalidKey.
func (e *invalidError) Is(target error) bool {
	return target == e.sentinel || target == idem.ErrInvalidKey
}

// handlerError carries the error of the rest of the pipeline through
// idem.Do. It hides the error from idem's classification (it has no Unwrap),
// so that even an error marked idem.Permanent is never stored: the lock is
// released and a retry runs. The behaviour unwraps it for its caller.
type handlerError struct{ err error }

func (e *handlerError) Error() string { return e.err.Error() }
