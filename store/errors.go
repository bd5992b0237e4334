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
	// ErrFull: a claim of a new key found the store holding as many
	// records as it may, none of which it may drop (results not yet at
	// their TTL, live claims). It is no failure of the store and not
	// retried by the runtime: the caller gets idem.ErrOverloaded, and may
	// try again later. (memstore, with Options.WhenFull left at
	// RefuseWhenFull.)
	ErrFull = errors.New("idem: store full")
	// ErrTooLarge: the store refuses an operation for its size (a
	// record's value, error message or fingerprint over what its server
	// takes; see [SizeLimited]). The operation was not sent: nothing
	// changed, and sending it again fails the same way, so it is not
	// retried. The runtime stores a small permanent error in place of a
	// result refused so (idem.ErrResultTooLarge).
	ErrTooLarge = errors.New("idem: too large for the store")
)

// IsContract reports whether err is one of the contract's errors (as opposed
// to a failure of the store).
func IsContract(err error) bool {
	return errors.Is(err, ErrLeaseLost) || errors.Is(err, ErrNotFound) ||
		errors.Is(err, ErrInProgress) || errors.Is(err, ErrInvalidKey) ||
		errors.Is(err, ErrInvalidArgument)
}

// (ErrFull is no contract error either: a runtime reports it as overload.)

// Retryable reports whether an operation that failed with err may succeed
// if sent again: a failure of the store itself (a network error, a
// timeout), as opposed to one of the contract's answers, a closed store,
// or a record the store cannot read.
func Retryable(err error) bool {
	return err != nil && !IsContract(err) && !errors.Is(err, ErrClosed) && !errors.Is(err, ErrCorrupt) &&
		!errors.Is(err, ErrFull) && !errors.Is(err, ErrTooLarge)
}
