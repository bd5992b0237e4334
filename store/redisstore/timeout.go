package redisstore

import (
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/store"
)

var _ store.TimeoutFloor = (*Store)(nil)

// TimeoutFloor reports how long an operation on a Redis that stopped
// answering can take whatever its context's deadline. go-redis applies a
// context's deadline to socket reads and writes only when the client's
// ContextTimeoutEnabled is set: then it is 0. Without it, it is the longer
// of the client's ReadTimeout and WriteTimeout (a negative value when
// either is -1: no deadline at all). A client of another kind than
// *redis.Client or *redis.ClusterClient reports 0: the store cannot tell.
func (s *Store) TimeoutFloor() time.Duration {
	var on bool
	var rt, wt time.Duration
	switch c := s.c.(type) {
	case *redis.Client:
		o := c.Options()
		on, rt, wt = o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout
	case *redis.ClusterClient:
		o := c.Options()
		on, rt, wt = o.ContextTimeoutEnabled, o.ReadTimeout, o.WriteTimeout
	default:
		return 0
	}
	if on {
		return 0
	}
	if rt < 0 || wt < 0 {
		return -1
	}
	return max(rt, wt)
}
