package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/store"
)

// With Options.WaitReplicas = n, every pipeline that carries a claim, a
// renewal or a completion ends with WAIT n WaitTimeout on the same
// connection: Redis answers how many replicas have the connection's
// writes so far. A write that fewer than n replicas confirm is not
// acknowledged, since a failover may drop it (the promoted replica never
// saw it):
//
//   - a claim that claimed the key answers ErrUnconfirmed, so fn never runs
//     on it, and the store releases it at once (best effort: the release
//     is a write on the same unsure master; when it is lost too, the key
//     is free when the claim's lease ends);
//   - a completion answers ErrUnconfirmed, which the runtime treats as an
//     outage: it keeps the result and sends the completion again (the
//     finish script recognises its own completion), until it is confirmed;
//   - a renewal answers ErrUnconfirmed, as a renewal with no reply: the
//     holder's local lease runs on.
//
// A pipeline through the cluster client itself (the calls that met MOVED
// or ASK) cannot name the node WAIT must run on: its writes count as
// unconfirmed.

// ErrUnconfirmed is the error of a claim, a renewal or a completion that
// fewer replicas than Options.WaitReplicas confirmed within
// Options.WaitTimeout. It is a failure of the store (store.Retryable
// reports true): the write may be lost by a failover, or it may be kept.
var ErrUnconfirmed = errors.New("redisstore: write not confirmed by enough replicas")

// confirms reports whether op's writes must be confirmed by replicas.
func confirms(op *store.Op) bool {
	switch op.Kind {
	case store.OpClaim, store.OpRenew, store.OpComplete:
		return true
	}
	return false
}

// confirm marks the writes of calls, just sent in one pipeline, as
// confirmed or not by w, the pipeline's WAIT (nil: none was sent).
func (s *Store) confirm(calls []call, w *redis.Cmd) {
	ok := false
	if w != nil {
		n, err := w.Int64()
		ok = err == nil && n >= int64(s.waitN)
	}
	for i := range calls {
		if confirms(calls[i].op) {
			calls[i].unconfirmed = !ok
			if !ok {
				s.nUnconfirmed.Add(1)
			}
		}
	}
}

// unconfirmed turns the decoded answers of unconfirmed writes into
// ErrUnconfirmed, and releases the claims among them.
func (s *Store) unconfirmed(ctx context.Context, calls []call) {
	var rel []*store.Op
	for _, c := range calls {
		op := c.op
		if !c.unconfirmed || op.Err != nil {
			continue
		}
		if op.Kind == store.OpClaim {
			if op.Result.Status != store.Claimed {
				continue // it wrote nothing of its own but maybe a waiter
			}
			rel = append(rel, &store.Op{Kind: store.OpRelease, Key: op.Key, Token: op.Result.Token})
		}
		op.Err = fmt.Errorf("%w: %d replicas asked for within %v", ErrUnconfirmed, s.waitN, s.waitTimeout)
		op.Result = store.ClaimResult{}
	}
	if len(rel) == 0 {
		return
	}
	rc := make([]call, 0, len(rel))
	for _, op := range rel {
		if c, ok := s.prepare(op); ok {
			rc = append(rc, c)
		}
	}
	s.exec(ctx, rc)
}
