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
	// ErrCorrupt: what the store holds at the key's place is not a record
	// it can read: a field missing or garbled, or another application's
	// data stored under the record's name. It is no contract error
	// (IsContract reports false): the runtime reports it as a failure of
	// the store. A caller that walks many keys (Runtime.Clear) can match it
	// with errors.Is to leave that key alone and go on. Stores return a
	// typed error that matches it and names the key (the Redis store's
	// *redisstore.CorruptError).
	ErrCorrupt = errors.New("idem: corrupt record")
)

// IsContract reports whether err is one of the contract's errors (as opposed
// to a failure of the store).
func IsContract(err error) bool {
	return errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotFound) ||
		errors.Is(err, ErrInProgress) || errors.Is(err, ErrInvalidKey) ||
		errors.Is(err, ErrInvalidArgument)
}

// Retryable reports whether an operation that failed with err may succeed
// if sent again: a failure of the store itself (a network error, a
// timeout), as opposed to one of the contract's answers, a closed store,
// or a record the store cannot read.
func Retryable(err error) bool {
	return err != nil && !IsContract(err) && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrCorrupt)
}
