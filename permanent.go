package idem

import "errors"

// Permanent marks err as a permanent outcome of a key: it is stored like a
// result and every later call with the key gets it back without running
// anything, until the result's TTL ends. Use it for business decisions
// (a declined card, an invalid order), not for faults: any error not marked
// permanent (and not matched by a classifier) releases the key, so the next
// call runs again.
//
// Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanentError{err: err}
}

type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// IsPermanent reports whether err, or an error it wraps, was marked with
// [Permanent] or is a [*ReplayedError].
func IsPermanent(err error) bool {
	var p *permanentError
	var r *ReplayedError
	return errors.As(err, &p) || errors.As(err, &r)
}

// ReplayedError is a stored permanent error given back to a caller that did
// not see the original: one in another process, or after the original error
// value left this one (callers in the owner's process while the record is
// in the LRU get the original error value).
//
// Arbitrary error values cannot be stored: Message is the original's message.
// An error of a kind registered with [RegisterError] or [RegisterErrorType]
// also keeps its code, and the replayed error wraps the registered sentinel
// or a value its decoder rebuilt, so errors.Is and errors.As match it as
// they matched the original. Errors of no registered kind match nothing
// but themselves ([IsPermanent] is true for every ReplayedError).
type ReplayedError struct {
	Key     string
	Message string
	// Code is the code the error's kind was registered under in the process
	// that stored it; "" for an error of no registered kind.
	Code string
	// Detail is the registered error's own message, what its decoder is
	// given: Message, unless the registered error was wrapped in another.
	Detail string
}

func (e *ReplayedError) Error() string { return e.Message }

// Unwrap returns the error of e's code as this process registered it (the
// sentinel, or a value rebuilt by the decoder), or nil when e has no code
// or this process does not know it.
func (e *ReplayedError) Unwrap() error { return decodeCode(e.Code, e.Detail) }
