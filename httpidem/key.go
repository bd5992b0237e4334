package httpidem

import (
	"fmt"
	"strings"
)

// Header names.
const (
	// HeaderKey is the request header that carries the idempotency key.
	HeaderKey = "Idempotency-Key"
	// HeaderReplayed is set to "true" on every response that was not
	// produced by this request's own run of the handler: a stored response
	// replayed, or the response of the run this request waited for.
	HeaderReplayed = "Idempotent-Replayed"
)

// MaxKeyLen is the longest idempotency key accepted, in bytes (after
// removing the quotes of the quoted form).
const MaxKeyLen = 255

// ParseKey returns the key in the value of an Idempotency-Key header.
//
// The IETF draft makes the value a Structured Field String, "a quoted
// string" (often a UUID): `"8e03978e-40d5-43e8-bc93-6894a57f9324"`. Many
// clients send it bare: 8e03978e-40d5-43e8-bc93-6894a57f9324. Both forms are
// accepted and give the same key:
//
//   - quoted: printable ASCII (space to '~') between double quotes, with \"
//     and \\ as the only escapes, and nothing after the closing quote
//     (Structured Field parameters are not accepted);
//   - bare: visible ASCII ('!' to '~') except '"', '\' and ',' (a comma
//     means several keys, as when two header lines were joined).
//
// Surrounding spaces and tabs are ignored. The key must be 1 to
// [MaxKeyLen] bytes. A value that breaks a rule is an error matching
// [ErrMalformedKey] that says which rule.
func ParseKey(value string) (string, error) {
	v := strings.Trim(value, " \t")
	if v == "" {
		return "", malformed(value, "empty")
	}
	if v[0] != '"' {
		return parseBare(value, v)
	}
	return parseQuoted(value, v)
}

func parseBare(raw, v string) (string, error) {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"' || c == '\\':
			return "", malformed(raw, fmt.Sprintf("%q is allowed only in the quoted form", c))
		case c == ',':
			return "", malformed(raw, "a comma: one key per request")
		case c < 0x21 || c > 0x7e:
			return "", malformed(raw, fmt.Sprintf("byte 0x%02x at %d is not visible ASCII", c, i))
		}
	}
	if len(v) > MaxKeyLen {
		return "", malformed(raw, fmt.Sprintf("%d bytes, over the %d-byte limit", len(v), MaxKeyLen))
	}
	return v, nil
}

func parseQuoted(raw, v string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\':
			i++
			if i == len(v) || (v[i] != '"' && v[i] != '\\') {
				return "", malformed(raw, `a backslash must escape '"' or '\'`)
			}
			b.WriteByte(v[i])
		case c == '"':
			if i != len(v)-1 {
				return "", malformed(raw, "text after the closing quote (parameters are not accepted)")
			}
			key := b.String()
			switch {
			case key == "":
				return "", malformed(raw, "empty")
			case len(key) > MaxKeyLen:
				return "", malformed(raw, fmt.Sprintf("%d bytes, over the %d-byte limit", len(key), MaxKeyLen))
			}
			return key, nil
		case c < 0x20 || c > 0x7e:
			return "", malformed(raw, fmt.Sprintf("byte 0x%02x at %d is not printable ASCII", c, i))
		default:
			b.WriteByte(c)
		}
		if b.Len() > MaxKeyLen {
			return "", malformed(raw, fmt.Sprintf("over the %d-byte limit", MaxKeyLen))
		}
	}
	return "", malformed(raw, "no closing quote")
}

func malformed(value, reason string) error {
	if len(value) > 64 {
		value = value[:64] + "..."
	}
	return fmt.Errorf("%w: %q: %s", ErrMalformedKey, value, reason)
}
