package idem

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/idemrt/idem/store"
)

// The stored text of a permanent error: every error comes back as the
// message, code and own message it was stored with, and text that does
// not follow the form is all message.

var (
	errInternalCoded = errors.New("coded")
	_                = mustRegister(RegisterError("internal_coded", errInternalCoded))
)

func mustRegister(err error) bool {
	if err != nil {
		panic(err)
	}
	return true
}

func TestStoredErrorRoundTrip(t *testing.T) {
	for _, c := range []struct {
		err          error
		code, detail string
	}{
		{errors.New("plain"), "", ""},
		{errors.New(""), "", ""},
		{errors.New("[idem:looks] like a code"), "", ""},
		{errors.New("[idem:"), "", ""},
		{errInternalCoded, "internal_coded", "coded"},
		// A wrapped sentinel keeps its own message as the detail.
		{fmt.Errorf("wrapped: %w", errInternalCoded), "internal_coded", "coded"},
		{fmt.Errorf("[idem:x] \"q\"\n%w", errInternalCoded), "internal_coded", "coded"},
	} {
		stored := storedError(c.err)
		msg, code, detail := parseStoredError(stored)
		if msg != c.err.Error() || code != c.code || detail != c.detail {
			t.Errorf("%q stored as %q: read back %q, %q, %q", c.err, stored, msg, code, detail)
		}
	}
}

// A registered error of a type keeps its own message apart when it is
// wrapped, for its decoder.
type internalTypedError struct{ n int }

func (e *internalTypedError) Error() string { return fmt.Sprintf("typed %d", e.n) }

var _ = mustRegister(RegisterErrorType("internal_typed", func(msg string) *internalTypedError {
	if msg == "panic" {
		panic("a decoder that did not expect this")
	}
	var e internalTypedError
	if _, err := fmt.Sscanf(msg, "typed %d", &e.n); err != nil {
		return nil
	}
	return &e
}))

func TestStoredErrorOwnMessage(t *testing.T) {
	err := fmt.Errorf("charge: %w", &internalTypedError{n: 7})
	stored := storedError(err)
	if want := `[idem:internal_typed "typed 7"] charge: typed 7`; stored != want {
		t.Fatalf("stored as %q, want %q", stored, want)
	}
	re := replayedError("k", stored)
	var te *internalTypedError
	if !errors.As(re, &te) || te.n != 7 || re.Error() != "charge: typed 7" {
		t.Fatalf("replayed %#v", re)
	}
	// A decoder that cannot read the message gives nothing to match.
	if re := replayedError("k", `[idem:internal_typed] garbled`); re.Unwrap() != nil || re.Message != "garbled" {
		t.Fatalf("garbled: %#v, unwraps to %v", re, re.Unwrap())
	}
	if re := replayedError("k", `[idem:internal_typed] panic`); errors.As(re, &te) || re.Message != "panic" {
		t.Fatalf("a decoder that panics: %#v", re)
	}
}

func TestParseStoredErrorMalformed(t *testing.T) {
	for _, s := range []string{
		"[idem:code",           // no end
		"[idem:code]no space",  // no space after ]
		`[idem:code "x] msg`,   // an unterminated quote
		`[idem:code "x"]msg`,   // no space after ]
		`[idem: "x"] msg`,      // an own message without a code
		`[idem:code "x" y] m`,  // more after the quote
		"[idem:code\"x\"] msg", // no space before the quote
	} {
		if msg, code, detail := parseStoredError(s); msg != s || code != "" || detail != "" {
			t.Errorf("%q read as %q, %q, %q; want it all message", s, msg, code, detail)
		}
	}
}

// A *CodecError comes back from its message: key (scoped or not, with any
// bytes), op and the codec's message; a message of another form gives
// nothing.
func TestParseCodecError(t *testing.T) {
	for _, key := range []string{"k", "a \"b\" c\x00\xff", store.BuildKey("x: y", store.Scope{Namespace: "n:%", Version: "v\n"}),
		store.KeyPrefix + "not:built:by BuildKey %zz"} {
		for _, op := range []string{"encode", "decode"} {
			ce := &CodecError{Key: key, Op: op, Err: errors.New("json: unsupported value: NaN (result: x)")}
			got := parseCodecError(ce.Error())
			if got == nil || got.Key != key || got.Op != op || got.Err.Error() != ce.Err.Error() {
				t.Errorf("%q read back as %#v", ce.Error(), got)
			}
		}
	}
	for _, msg := range []string{"", "idem: key", `idem: key "k"`, `idem: key "k": stash result: x`, `idem: key "k" (namespace "n"): encode result: x`,
		`idem: key "k" (namespace "n", version "v": encode result: x`, `idem: key k: encode result: x`} {
		if got := parseCodecError(msg); got != nil {
			t.Errorf("%q read as %#v, want nothing", msg, got)
		}
	}
}

// A *CodecError of a long key (its key cut in the message) and one stored
// before the prefix was written once come back too; the result-too-large
// sentinel still matches, and the message names "idem: " once.
func TestParseCodecErrorCutAndOld(t *testing.T) {
	long := strings.Repeat("k", 300)
	ce := &CodecError{Key: long, Op: "encode", Err: fmt.Errorf("%w: 2 MiB over 1 MiB", ErrResultTooLarge)}
	msg := ce.Error()
	if strings.Count(msg, "idem: ") != 1 || !strings.Contains(msg, "... (300 bytes)") {
		t.Fatalf("message %q", msg)
	}
	got := parseCodecError(msg)
	if got == nil || !strings.HasPrefix(long, got.Key) || !errors.Is(got.Err, ErrResultTooLarge) || got.Err.Error() != "idem: result too large: 2 MiB over 1 MiB" {
		t.Fatalf("%q read back as %#v", msg, got)
	}
	old := `idem: key "k": encode result: idem: result too large: 2 MiB over 1 MiB`
	got = parseCodecError(old)
	if got == nil || got.Key != "k" || !errors.Is(got.Err, ErrResultTooLarge) ||
		got.Error() != `idem: key "k": encode result: result too large: 2 MiB over 1 MiB` {
		t.Fatalf("%q read back as %#v", old, got)
	}
}
