package redisstore

import (
	"testing"

	"github.com/idemrt/idem/store"
)

// A store with Options.Scope reads the invalidation messages of every
// store on the same prefix as its own keys: those of its scope, a prefix
// within it, or a prefix wider than it (every key of the store); the
// messages about other scopes are not its own.
func TestParseInvalidationWithScope(t *testing.T) {
	s := &Store{scope: store.BuildKey("", store.Scope{Namespace: "acme", Version: "v1"})}
	for _, c := range []struct {
		msg  string
		want store.Invalidation
		ok   bool
	}{
		{invalKey + s.scope + "order-1", store.Invalidation{Key: "order-1"}, true},
		{invalKey + "ff:idemp:other:v1:order-1", store.Invalidation{}, false},
		{invalPrefix + s.scope + "ord", store.Invalidation{Key: "ord", Prefix: true}, true},
		{invalPrefix + "ff:idemp:acme:", store.Invalidation{Prefix: true}, true},
		{invalPrefix, store.Invalidation{Prefix: true}, true},
		{invalPrefix + "ff:idemp:other:", store.Invalidation{}, false},
		{"", store.Invalidation{}, false},
		{"zjunk", store.Invalidation{}, false},
	} {
		got, ok := s.parseInvalidation(c.msg)
		if got != c.want || ok != c.ok {
			t.Errorf("%q: %+v %v, want %+v %v", c.msg, got, ok, c.want, c.ok)
		}
	}
}
