package redisstore

import (
	"fmt"
	"strings"

	"github.com/idemrt/idem/store"
)

// maxNameLen bounds the keys that a forget accepts (see checkKey).
const maxNameLen = 64 << 10

// checkKey validates the key of an op of kind kind. A claim, the one op
// that makes a record, must fit store.MaxKeyLen once Options.Scope is
// applied: the stored key (the scope's prefix, then the key) is what every
// other store, runtime and the admin command see, so none of them meets a
// record whose key it refuses. A forget takes any key up to 64 KiB, so
// that a record stored under a longer key (by a version that checked the
// key without its scope), which Scan lists, can still be deleted
// (Runtime.Clear does). Every other op takes the keys store.ValidateKey
// accepts, as the store contract wants.
func (s *Store) checkKey(kind store.OpKind, key string) error {
	switch kind {
	case store.OpClaim:
		if err := store.ValidateKey(key); err != nil {
			return err
		}
		if n := len(s.scope) + len(key); n > store.MaxKeyLen {
			return fmt.Errorf("%w: key is %d bytes: with the store's scope %q it is %d, longer than %d",
				store.ErrInvalidKey, len(key), s.scope, n, store.MaxKeyLen)
		}
		return nil
	case store.OpForget:
		switch {
		case key == "":
			return fmt.Errorf("%w: empty key", store.ErrInvalidKey)
		case len(key) > maxNameLen:
			return fmt.Errorf("%w: key is %d bytes, longer than %d", store.ErrInvalidKey, len(key), maxNameLen)
		case strings.IndexByte(key, 0) >= 0:
			return fmt.Errorf("%w: key contains a NUL byte", store.ErrInvalidKey)
		}
		return nil
	}
	return store.ValidateKey(key)
}

// MaxKeyLen returns the longest key the store claims: store.MaxKeyLen less
// the length of Options.Scope's prefix (store.BuildKey("", scope)), so
// that the stored key fits store.MaxKeyLen. A longer key's claim fails
// with store.ErrInvalidKey.
func (s *Store) MaxKeyLen() int { return max(store.MaxKeyLen-len(s.scope), 0) }
