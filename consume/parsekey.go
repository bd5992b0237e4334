package consume

import (
	"strings"

	"github.com/idemrt/idem/store"
)

// KeyParts are the parts of a key built by [Key].
type KeyParts struct {
	// Scope is the scope, unescaped.
	Scope string
	// Key is the message key; when Digest is set, the hex SHA-256 that
	// stands for a message key too long (or holding a NUL byte) to be used
	// as it is.
	Key    string
	Digest bool
}

// unescaper undoes store.EscapeSegment: "%25" is '%', "%3A" is ':'.
var unescaper = strings.NewReplacer("%25", "%", "%3A", ":")

// ParseKey splits an idem key built by [Key] back into its scope and
// message key, for tools that list a store's keys (the admin command
// cmd/idem shows consumer records by them). It reports false for a key
// Key cannot have built.
func ParseKey(idemKey string) (KeyParts, bool) {
	rest, ok := strings.CutPrefix(idemKey, keyPrefix)
	if !ok {
		return KeyParts{}, false
	}
	i := strings.IndexByte(rest, ':')
	if i < 0 {
		return KeyParts{}, false
	}
	esc, key := rest[:i], rest[i+1:]
	p := KeyParts{Key: key}
	if s, digest := strings.CutSuffix(esc, strings.TrimSuffix(digestMark, ":")); digest {
		esc, p.Digest = s, true
	}
	p.Scope = unescaper.Replace(esc)
	if store.EscapeSegment(p.Scope) != esc || key == "" {
		return KeyParts{}, false // a stray '%': not an escaped scope
	}
	return p, true
}
