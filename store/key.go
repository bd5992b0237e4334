package store

import (
	"fmt"
	"strings"
	"time"

	"github.com/idemrt/idem/internal/keytext"
)

// MaxKeyLen is the longest key accepted, in bytes.
const MaxKeyLen = 1024

// MaxDuration is the longest lease or TTL accepted: 100 years. Longer ones
// are ErrInvalidArgument (a lease or TTL is never infinite, and time
// arithmetic on larger values would overflow).
const MaxDuration = 100 * 365 * 24 * time.Hour

// CheckDuration returns an ErrInvalidArgument error naming what when d is
// not in (0, MaxDuration].
func CheckDuration(what string, d time.Duration) error {
	if d <= 0 {
		return fmt.Errorf("%w: %s %v must be positive", ErrInvalidArgument, what, d)
	}
	if d > MaxDuration {
		return fmt.Errorf("%w: %s %v is longer than the %v limit", ErrInvalidArgument, what, d, MaxDuration)
	}
	return nil
}

// CheckClaim returns an ErrInvalidArgument error when req has no owner, or
// a lease or TTL that [CheckDuration] rejects: the checks every store makes
// before a claim.
func CheckClaim(req ClaimRequest) error {
	if req.Owner == "" {
		return fmt.Errorf("%w: empty owner", ErrInvalidArgument)
	}
	if err := CheckDuration("lease", req.Lease); err != nil {
		return err
	}
	return CheckDuration("ttl", req.TTL)
}

// Scope places keys in a namespace and a version, so that two tenants, two
// flows or two versions of a handler never share a key.
type Scope struct {
	Namespace string
	Version   string
}

// KeyPrefix starts every key built by [BuildKey].
const KeyPrefix = "ff:idemp:"

// BuildKey returns the scoped key ff:idemp:<namespace>:<version>:<key>.
//
// In the namespace and the version, '%' is written as "%25" and ':' as
// "%3A", so the first two segments never contain a raw ':' and two different
// (scope, key) pairs never build the same string. The key itself is the last
// segment and is kept as it is.
func BuildKey(key string, s Scope) string {
	var b strings.Builder
	b.Grow(len(KeyPrefix) + len(s.Namespace) + len(s.Version) + len(key) + 2)
	b.WriteString(KeyPrefix)
	escapeSegment(&b, s.Namespace)
	b.WriteByte(':')
	escapeSegment(&b, s.Version)
	b.WriteByte(':')
	b.WriteString(key)
	return b.String()
}

// EscapeSegment returns s with '%' written as "%25" and ':' as "%3A": the
// escaping BuildKey applies to a scope's segments, for callers that compose
// keys of their own parts (a part so escaped holds no raw ':', so it never
// runs into the next one).
func EscapeSegment(s string) string {
	if !strings.ContainsAny(s, "%:") {
		return s
	}
	var b strings.Builder
	escapeSegment(&b, s)
	return b.String()
}

func escapeSegment(b *strings.Builder, s string) {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '%':
			b.WriteString("%25")
		case ':':
			b.WriteString("%3A")
		default:
			b.WriteByte(c)
		}
	}
}

// ParseKey splits a key built by [BuildKey] back into its key and scope. It
// reports false for a string BuildKey cannot have produced.
func ParseKey(scoped string) (key string, s Scope, ok bool) {
	rest, found := strings.CutPrefix(scoped, KeyPrefix)
	if !found {
		return "", Scope{}, false
	}
	ns, rest, found := strings.Cut(rest, ":")
	if !found {
		return "", Scope{}, false
	}
	ver, key, found := strings.Cut(rest, ":")
	if !found {
		return "", Scope{}, false
	}
	nsU, ok1 := unescapeSegment(ns)
	verU, ok2 := unescapeSegment(ver)
	if !ok1 || !ok2 {
		return "", Scope{}, false
	}
	return key, Scope{Namespace: nsU, Version: verU}, true
}

func unescapeSegment(s string) (string, bool) {
	if !strings.Contains(s, "%") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		if i+3 > len(s) {
			return "", false
		}
		switch s[i+1 : i+3] {
		case "25":
			b.WriteByte('%')
		case "3A":
			b.WriteByte(':')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// ValidateKey returns an error wrapping [ErrInvalidKey] when key is empty,
// longer than [MaxKeyLen] bytes or contains a NUL byte.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty key", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: key is %d bytes, longer than %d", ErrInvalidKey, len(key), MaxKeyLen)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: key %s contains a NUL byte", ErrInvalidKey, keytext.Quote(key))
	}
	return nil
}
