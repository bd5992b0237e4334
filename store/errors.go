package store

import "errors"

// Errors of the store contract. Stores return them (possibly wrapped); any
// other error is a failure of the store itself.
var (
	// ErrLeaseLost: the token no longer holds the key.
	ErrLeaseLost = errors.New("idem: lease lost")
	// ErrNotFound: the key has no completed record.
	ErrNotFound = errors.New("idem: record not found")
	// ErrInProgress: the key is held by an owner.
	ErrInProgress = errors.New("idem: key in progress")
	// ErrInvalidKey: the key is empty, longer than [MaxKeyLen] or holds a NUL byte.
	ErrInvalidKey = errors.New("idem: invalid key")
	// ErrInvalidArgument: a zero or negative lease or TTL, or an empty owner.
	ErrInvalidArgument = errors.New("idem: invalid argument")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("idem: closed")
)

// IsContract reports whether err is one of the contract's errors (as opposed
// to a failure of the store).
func IsContract(err error) bool {
	return errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotFound) ||
		errors.Is(err, ErrInProgress) || errors.Is(err, ErrInvalidKey) ||
		errors.Is(err, ErrInvalidArgument)
}
