package cqrs

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/idemrt/idem/store"
)

// MaxIDLen is the longest request id, and the longest tenant, accepted, in
// bytes.
const MaxIDLen = 255

// Key prefixes. Only the lock form is used as a key: see [Key].
const (
	lockPrefix = "idempotency_lock:"
)

// Key returns the idem key of a command: with a tenant,
//
//	idempotency_lock:tenant:<tenant>:command:<requestID>
//
// and without one (tenant ""), idempotency_lock:command:<requestID>. In the
// tenant and the request id, '%' is written %25 and ':' is written %3A, so
// no two (tenant, request id) pairs give the same key.
//
// idem keeps a key's lock (its lease) and its processed payload in one
// record, so this one key stands for both the idempotency_lock and the
// idempotency_processed keys of a two-key design. Use it with
// [idem.Runtime.Forget] to make a processed command run again.
//
// The request id must be 1 to [MaxIDLen] bytes and the tenant at most
// MaxIDLen bytes, both valid UTF-8 without control characters; otherwise Key
// returns an error matching [ErrInvalidRequestID] or [ErrInvalidTenant] (and
// idem.ErrInvalidKey).
func Key(tenant, requestID string) (string, error) {
	if requestID == "" {
		return "", ErrNoRequestID
	}
	if err := checkSegment(ErrInvalidRequestID, requestID); err != nil {
		return "", err
	}
	if err := checkSegment(ErrInvalidTenant, tenant); err != nil {
		return "", err
	}
	var b strings.Builder
	b.Grow(len(lockPrefix) + len("tenant::command:") + len(tenant) + len(requestID) + 8)
	b.WriteString(lockPrefix)
	if tenant != "" {
		b.WriteString("tenant:")
		b.WriteString(store.EscapeSegment(tenant))
		b.WriteByte(':')
	}
	b.WriteString("command:")
	b.WriteString(store.EscapeSegment(requestID))
	key := b.String()
	if err := store.ValidateKey(key); err != nil {
		// Only possible with ids and tenants full of escaped characters.
		return "", &invalidError{sentinel: ErrInvalidRequestID, value: requestID,
			reason: fmt.Sprintf("with tenant %q the key would be %d bytes, over the %d-byte limit", tenant, len(key), store.MaxKeyLen)}
	}
	return key, nil
}

// checkSegment validates a request id or a tenant ("" is checked by the
// caller).
func checkSegment(sentinel error, s string) error {
	bad := func(reason string) error { return &invalidError{sentinel: sentinel, value: s, reason: reason} }
	if len(s) > MaxIDLen {
		return bad(fmt.Sprintf("%d bytes, over the %d-byte limit", len(s), MaxIDLen))
	}
	if !utf8.ValidString(s) {
		return bad("not valid UTF-8")
	}
	for _, r := range s {
		if unicode.IsControl(r) {
			return bad(fmt.Sprintf("holds the control character %U", r))
		}
	}
	return nil
}
