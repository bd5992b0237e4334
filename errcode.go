package idem

// Permanent errors that keep their identity in the store: a registry of
// codes, and the text a permanent error is stored as.

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/idemrt/idem/internal/keytext"
	"github.com/idemrt/idem/store"
)

// RegisterError gives the permanent errors that match sentinel (by
// errors.Is) the code code, so that they keep matching it wherever they are
// replayed: a caller in another process sharing the store, or in this one
// after the result left the cache, gets a [*ReplayedError] that wraps
// sentinel, so errors.Is(err, sentinel) is true there as it is here. The
// code is stored with the error's message; every process that replays it
// must register the same code (a code it does not know replays as the
// message alone).
//
// Register at start-up (in an init function, say), before the runtime
// stores or replays such errors. It returns an error matching
// [ErrInvalidArgument] for an empty or malformed code (1 to 64 letters,
// digits and "._-/"), a nil or non-comparable sentinel, or a code or
// sentinel already registered. When an error matches more than one
// registration, the one registered first gives its code. The code
// "idem.codec" is taken: it is [*CodecError]'s, registered by this
// package.
func RegisterError(code string, sentinel error) error {
	if sentinel == nil {
		return fmt.Errorf("%w: RegisterError(%q): nil sentinel", ErrInvalidArgument, code)
	}
	if !reflect.TypeOf(sentinel).Comparable() {
		return fmt.Errorf("%w: RegisterError(%q): a sentinel of type %T cannot be compared", ErrInvalidArgument, code, sentinel)
	}
	return register(&errorKind{
		code:     code,
		sentinel: sentinel,
		match: func(err error) (string, bool) {
			// The detail is the sentinel's own message, also when err wraps
			// it (fmt.Errorf("charge: %w", sentinel)): what the replayed
			// error's Detail and the admin command show.
			if errors.Is(err, sentinel) {
				return sentinel.Error(), true
			}
			return "", false
		},
		decode: func(string) error { return sentinel },
	})
}

// RegisterErrorType gives the permanent errors of type E (found by
// errors.As) the code code. decode rebuilds such an error from its own
// message (what its Error method returned, without the messages of errors
// that wrap it) in a process that replays it from the store: the
// [*ReplayedError] there wraps decode's result, so errors.As(err, &e) with
// an e of type E is true there as it is here. Put in the message what
// decode needs.
//
// E must be a concrete type (a pointer to a struct, typically), not an
// interface. decode may return nil (or panic) for a message it cannot
// read: the replayed error then matches nothing but itself. Errors are as
// for [RegisterError]: a bad or taken code, a nil decode, or a type
// already registered.
func RegisterErrorType[E error](code string, decode func(message string) E) error {
	typ := reflect.TypeFor[E]()
	if typ.Kind() == reflect.Interface {
		return fmt.Errorf("%w: RegisterErrorType(%q): %v is an interface; register a concrete type", ErrInvalidArgument, code, typ)
	}
	if decode == nil {
		return fmt.Errorf("%w: RegisterErrorType(%q): nil decode function", ErrInvalidArgument, code)
	}
	return register(&errorKind{
		code: code,
		typ:  typ,
		match: func(err error) (string, bool) {
			var e E
			if errors.As(err, &e) {
				return e.Error(), true
			}
			return "", false
		},
		decode: func(msg string) (err error) {
			// A decoder that panics on a message it did not expect must not
			// bring down the errors.Is or errors.As that unwrapped the
			// replayed error: the message alone is replayed then.
			defer func() {
				if recover() != nil {
					err = nil
				}
			}()
			e := decode(msg)
			if v := reflect.ValueOf(e); !v.IsValid() || isNilValue(v) {
				return nil
			}
			return e
		},
	})
}

// isNilValue reports whether v holds a nil pointer, map, slice, channel or
// function.
func isNilValue(v reflect.Value) bool {
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Chan, reflect.Func, reflect.Interface:
		return v.IsNil()
	}
	return false
}

// codecErrorCode is the code [*CodecError] is stored with. It is
// registered before any code of the user's (an importer's init runs after
// this package's), so it is always the first to match.
const codecErrorCode = "idem.codec"

func init() {
	if err := RegisterErrorType(codecErrorCode, parseCodecError); err != nil {
		panic(err)
	}
}

// parseCodecError rebuilds a *CodecError from its message, "idem: " +
// describeKey(key) + ": " + op + " result: " + the codec's message, or
// returns nil for a message not of that form. A long key is cut in the
// message (internal/keytext): the rebuilt Key is then its head alone.
// Messages stored before the prefix was written once ("...: idem: result
// too large") are read too.
func parseCodecError(msg string) *CodecError {
	rest, ok := strings.CutPrefix(msg, "idem: key ")
	if !ok {
		return nil
	}
	key, _, rest, ok := keytext.Cut(rest)
	if !ok {
		return nil
	}
	if r, scoped := strings.CutPrefix(rest, " (namespace "); scoped {
		var s store.Scope
		if s.Namespace, _, r, ok = keytext.Cut(r); !ok {
			return nil
		}
		if r, ok = strings.CutPrefix(r, ", version "); !ok {
			return nil
		}
		if s.Version, _, r, ok = keytext.Cut(r); !ok {
			return nil
		}
		if rest, ok = strings.CutPrefix(r, ")"); !ok {
			return nil
		}
		key = store.BuildKey(key, s)
	}
	if rest, ok = strings.CutPrefix(rest, ": "); !ok {
		return nil
	}
	op, codecMsg, ok := strings.Cut(rest, " result: ")
	if !ok || (op != "encode" && op != "decode") {
		return nil
	}
	codecMsg = strings.TrimPrefix(codecMsg, prefix)
	if rest, ok := strings.CutPrefix(codecMsg, unprefixed(ErrResultTooLarge)); ok {
		// The sentinel matches on every instance that replays it.
		return &CodecError{Key: key, Op: op, Err: fmt.Errorf("%w%s", ErrResultTooLarge, rest)}
	}
	return &CodecError{Key: key, Op: op, Err: errors.New(codecMsg)}
}

// errorKind is one registration: a code, how to recognize its errors, and
// how to rebuild one.
type errorKind struct {
	code     string
	sentinel error        // RegisterError
	typ      reflect.Type // RegisterErrorType
	// match reports whether err is of this kind, with the message decode
	// will be given.
	match  func(err error) (detail string, ok bool)
	decode func(detail string) error
}

// errorKinds holds the registrations in order, copied on write: reading it
// (on every permanent error stored or replayed) takes no lock.
var (
	errorKinds   atomic.Pointer[[]*errorKind]
	errorKindsMu sync.Mutex // serializes registrations
)

func register(k *errorKind) error {
	if err := checkCode(k.code); err != nil {
		return err
	}
	errorKindsMu.Lock()
	defer errorKindsMu.Unlock()
	var kinds []*errorKind
	if p := errorKinds.Load(); p != nil {
		kinds = *p
	}
	for _, o := range kinds {
		switch {
		case o.code == k.code:
			return fmt.Errorf("%w: error code %q is registered already", ErrInvalidArgument, k.code)
		case k.sentinel != nil && o.sentinel == k.sentinel:
			return fmt.Errorf("%w: error %q is registered already, as %q", ErrInvalidArgument, k.sentinel, o.code)
		case k.typ != nil && o.typ == k.typ:
			return fmt.Errorf("%w: error type %v is registered already, as %q", ErrInvalidArgument, k.typ, o.code)
		}
	}
	next := append(kinds[:len(kinds):len(kinds)], k)
	errorKinds.Store(&next)
	return nil
}

// checkCode refuses a code that is empty, too long, or holds a character
// the stored form cannot carry.
func checkCode(code string) error {
	if code == "" || len(code) > 64 {
		return fmt.Errorf("%w: error code %q: it must be 1 to 64 bytes", ErrInvalidArgument, code)
	}
	for i := 0; i < len(code); i++ {
		c := code[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("._-/", c) >= 0) {
			return fmt.Errorf("%w: error code %q: only letters, digits and ._-/ are allowed", ErrInvalidArgument, code)
		}
	}
	return nil
}

// codeOf returns the code of err's registered kind, and the message its
// decoder needs, or "" when err is of no registered kind.
//
// A replayed error keeps the code it was stored with, even when this
// process does not know the code: storing it again loses nothing.
func codeOf(err error) (code, detail string) {
	if p := errorKinds.Load(); p != nil {
		for _, k := range *p {
			if d, ok := k.match(err); ok {
				return k.code, d
			}
		}
	}
	var re *ReplayedError
	if errors.As(err, &re) && re.Code != "" {
		return re.Code, re.Detail
	}
	return "", ""
}

// decodeCode rebuilds the error of a registered code from its message, or
// returns nil for a code this process does not know.
func decodeCode(code, detail string) error {
	p := errorKinds.Load()
	if code == "" || p == nil {
		return nil
	}
	for _, k := range *p {
		if k.code == code {
			return k.decode(detail)
		}
	}
	return nil
}

// codeMark starts the stored text of a permanent error that carries a code.
//
// The stored text (store.Record.Error) is the error's message, as always,
// when the error has no registered code. With a code it is
//
//	[idem:<code>] <message>
//
// or, when the registered error is wrapped and its own message differs
// from the whole one,
//
//	[idem:<code> "<its own message, Go-quoted>"] <message>
//
// A message without a code that happens to start with codeMark is stored
// as "[idem:] <message>", so that it is never read as one with a code.
const codeMark = "[idem:"

// storedError returns the text err is stored as.
func storedError(err error) string {
	msg := err.Error()
	code, detail := codeOf(err)
	switch {
	case code == "" && strings.HasPrefix(msg, codeMark):
		return codeMark + "] " + msg
	case code == "":
		return msg
	case detail == msg:
		return codeMark + code + "] " + msg
	}
	return codeMark + code + " " + strconv.Quote(detail) + "] " + msg
}

// parseStoredError splits the stored text of a permanent error into its
// message, code and the registered error's own message. Text that does not
// follow the form is all message.
func parseStoredError(s string) (msg, code, detail string) {
	rest, ok := strings.CutPrefix(s, codeMark)
	if !ok {
		return s, "", ""
	}
	end := strings.IndexAny(rest, " ]")
	if end < 0 {
		return s, "", ""
	}
	code, rest = rest[:end], rest[end:]
	if code != "" && checkCode(code) != nil {
		return s, "", ""
	}
	quoted := false
	if rest[0] == ' ' {
		q, err := strconv.QuotedPrefix(rest[1:])
		if err != nil {
			return s, "", ""
		}
		detail, _ = strconv.Unquote(q)
		rest, quoted = rest[1+len(q):], true
	}
	msg, ok = strings.CutPrefix(rest, "] ")
	if !ok || (code == "" && quoted) {
		return s, "", ""
	}
	if !quoted {
		detail = msg
	}
	if code == "" {
		detail = ""
	}
	return msg, code, detail
}

// replayedError is the error a caller gets for a permanent error read from
// the store as text.
func replayedError(key, stored string) *ReplayedError {
	msg, code, detail := parseStoredError(stored)
	return &ReplayedError{Key: key, Message: msg, Code: code, Detail: detail}
}

// NewReplayedError returns err as a caller gets it back once it has been
// stored: its message, and the code (with the registered error's own
// message) if it is of a kind registered with [RegisterError] or
// [RegisterErrorType]. Front ends that keep a permanent error inside a
// stored value of their own (as package flows does) use it to store and
// rebuild one: keep Message, Code and Detail, and build a ReplayedError of
// them when replaying.
func NewReplayedError(key string, err error) *ReplayedError {
	if err == nil {
		return nil
	}
	return replayedError(key, storedError(err))
}
