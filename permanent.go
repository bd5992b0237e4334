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
// value left this one. Only its message survives storage, so errors.Is does
// not match the original's sentinels; callers in the owner's process while
// the record is in the LRU get the original error value.
type ReplayedError struct {
	Key     string
	Message string
}

func (e *ReplayedError) Error() string { return e.Message }
