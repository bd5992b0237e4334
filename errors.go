package idem

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/idemrt/idem/internal/keytext"
	"github.com/idemrt/idem/store"
)

// Errors returned by the runtime. Test for them with errors.Is; the typed
// errors below carry the details and match their sentinel.
var (
	// ErrConflict: the key is in progress and the caller could not wait for
	// it (settle time zero or used up). The error is a [*ConflictError].
	ErrConflict = errors.New("idem: key in progress")
	// ErrFingerprintMismatch: the key was used, or is in use, by a request
	// with a different fingerprint. Nothing was replayed.
	ErrFingerprintMismatch = errors.New("idem: fingerprint mismatch")
	// ErrLeaseLost: the caller's claim no longer holds the key while its
	// function ran, and its result was not stored: its lease ran out and
	// another caller took the key over, or the store lost the claim itself
	// (a Redis failover promoted a replica that never received it; see
	// docs/redis.md, "Failover"), so the key may run again elsewhere.
	ErrLeaseLost = store.ErrLeaseLost
	// ErrClosed: the runtime is closed or closing.
	ErrClosed = store.ErrClosed
	// ErrOverloaded: the key's shard already has Options.MaxPending callers,
	// or the key Options.MaxWaitersPerKey callers waiting for it.
	ErrOverloaded = errors.New("idem: overloaded")
	// ErrResultTooLarge: a function's encoded result is over
	// Options.MaxResultBytes. Its function ran, so the result is stored as
	// a small permanent error (a *CodecError wrapping this one), never
	// retried: every caller of the key gets it, here and on every instance.
	ErrResultTooLarge = errors.New("idem: result too large")
	// ErrInvalidKey: the key is empty, longer than 1 KiB or holds a NUL byte.
	ErrInvalidKey = store.ErrInvalidKey
	// ErrInvalidArgument: a bad option value, a nil function or a nil runtime.
	ErrInvalidArgument = store.ErrInvalidArgument
	// ErrNotFound: [Get] found no result for the key: it never ran, or was
	// forgotten or released, or its result expired. (With a store that is
	// no store.Inspector, a key in progress too.)
	ErrNotFound = store.ErrNotFound
	// ErrInProgress: [Get] found the key held by a run, here or in another
	// instance: it has no result yet.
	ErrInProgress = store.ErrInProgress
	// ErrStoreUnavailable: the store failed (down, slow, restarting). The
	// error is a [*StoreError] wrapping the cause. Nothing is reported done
	// that the store did not acknowledge.
	ErrStoreUnavailable = errors.New("idem: store unavailable")
)

// ConflictError is the [ErrConflict] of one key.
type ConflictError struct {
	// Key is the key, as given to Do.
	Key string
	// State is the key's state: "in-progress".
	State string
	// LeaseLeft is how long the holder's lease had left, when known.
	LeaseLeft time.Duration
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("idem: %s is %s (lease left %v)", describeKey(e.Key), e.State, e.LeaseLeft.Round(time.Millisecond))
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// StoreError is the [ErrStoreUnavailable] of one store operation.
type StoreError struct {
	Key string
	Op  string // claim, complete, release, renew, get, forget, inspect or scan
	Err error  // the store's error
}

func (e *StoreError) Error() string {
	return fmt.Sprintf("idem: %s: store %s failed: %s", describeKey(e.Key), e.Op, unprefixed(e.Err))
}

// Is makes errors.Is(err, ErrStoreUnavailable) true.
func (e *StoreError) Is(target error) bool { return target == ErrStoreUnavailable }

// Unwrap returns the store's error.
func (e *StoreError) Unwrap() error { return e.Err }

// PanicError is what callers of a key get when its function panicked: the
// owner and every caller waiting for it get the same error, and the claim is
// released so a later call runs again. (A panic is a bug, not a business
// outcome; it is not stored.)
type PanicError struct {
	Key   string
	Value any    // the value passed to panic
	Stack []byte // the owner's stack when it panicked
}

func (e *PanicError) Error() string {
	if err, ok := e.Value.(error); ok {
		return fmt.Sprintf("idem: %s: function panicked: %s", describeKey(e.Key), unprefixed(err))
	}
	return fmt.Sprintf("idem: %s: function panicked: %v", describeKey(e.Key), e.Value)
}

// Unwrap returns the panic value if it is an error.
func (e *PanicError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// CodecError reports a value that could not be encoded for the store, or a
// stored value that could not be decoded into the caller's type.
//
// A value that cannot be encoded is stored as a permanent error: its
// function ran, and its side effect must not run again on a retry. Every
// caller gets it the same way, in the owner's process or another:
// permanent ([IsPermanent] is true), with errors.As finding the
// *CodecError. It is stored with a code of its own, "idem.codec" (see
// [RegisterErrorType]), so a replay from the store wraps a *CodecError
// rebuilt from the message: its Key and Op as stored, and an Err that
// holds the codec error's message only.
type CodecError struct {
	Key string
	Op  string // "encode" or "decode"
	Err error
}

func (e *CodecError) Error() string {
	return fmt.Sprintf("idem: %s: %s result: %s", describeKey(e.Key), e.Op, unprefixed(e.Err))
}

// Unwrap returns the codec's error.
func (e *CodecError) Unwrap() error { return e.Err }

// keyErr wraps a sentinel with the key it is about.
func keyErr(key string, err error) error {
	return wrapf(err, "idem: %s", describeKey(key))
}

// prefix starts the package's error messages, once: an error of the
// package (or of package store) wrapped by another loses its own.
const prefix = "idem: "

// unprefixed returns err's message without its leading "idem: ", also
// after a store's own prefix ("memstore: idem: store full" reads
// "memstore: store full"), for a message that names idem already.
func unprefixed(err error) string {
	if err == nil {
		return "<nil>"
	}
	msg := strings.TrimPrefix(err.Error(), prefix)
	if pkg, rest, ok := strings.Cut(msg, ": "); ok && !strings.ContainsAny(pkg, " \"") && strings.HasPrefix(rest, prefix) {
		return pkg + ": " + rest[len(prefix):]
	}
	return msg
}

// wrapped is an error whose message is its head, ": " and the message of
// the errors it wraps, each without their prefix.
type wrapped struct {
	msg string
	err error
}

func (e *wrapped) Error() string { return e.msg }
func (e *wrapped) Unwrap() error { return e.err }

// wrapf returns err wrapped under the head format makes: "<head>: <err's
// message without its prefix>"; errors.Is and errors.As see err.
func wrapf(err error, format string, args ...any) error {
	return &wrapped{msg: fmt.Sprintf(format, args...) + ": " + unprefixed(err), err: err}
}

// wrappedTwo is wrapped with a cause in parentheses: "<head>: <err> (<cause>)".
type wrappedTwo struct {
	msg        string
	err, cause error
}

func (e *wrappedTwo) Error() string   { return e.msg }
func (e *wrappedTwo) Unwrap() []error { return []error{e.err, e.cause} }

// describeKey names a key in messages; a key built by store.BuildKey is shown
// with its namespace and version, so errors tell tenants apart. A long key
// (or segment) is cut, with its length (see internal/keytext).
func describeKey(key string) string {
	if name, scope, ok := store.ParseKey(key); ok {
		return fmt.Sprintf("key %s (namespace %s, version %s)", keytext.Quote(name), keytext.Quote(scope.Namespace), keytext.Quote(scope.Version))
	}
	return "key " + keytext.Quote(key)
}
