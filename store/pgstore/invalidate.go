package pgstore

// Invalidations (store.Invalidator) on the listener of the wake-ups: the
// forget statement NOTIFYs the table's invalidation channel with the key
// it deleted, in the batch's transaction (listeners get it once the delete
// is committed); InvalidatePrefix NOTIFYs a cleared prefix there. Every
// store on the table LISTENs to that channel on its listening connection,
// once for all its invalidation subscriptions.
//
// A payload must be text under 8000 bytes: it carries the key in hex
// after a letter ("k" a key, "p" a prefix). A key is at most 1 KiB
// (store.ValidateKey), so its hex always fits; a prefix too long to fit
// (longer than any key, so it names none) is sent as the empty prefix,
// every key, which drops more than needed, never less.

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/idemrt/idem/store"
)

// maxPayload is the longest NOTIFY payload PostgreSQL takes, in bytes
// (below 8000 by its default build).
const maxPayload = 7999

// invalChannelOf is the invalidation channel of table (its quoted,
// schema-qualified name): a digest of it, since a channel name is at most
// 63 bytes.
func invalChannelOf(table string) string {
	sum := sha256.Sum256([]byte(table))
	return "idem_inval_" + hex.EncodeToString(sum[:10])
}

// keyPayload is the invalidation payload of a forgotten key.
func keyPayload(key string) string {
	if p := "k" + hex.EncodeToString([]byte(key)); len(p) <= maxPayload {
		return p
	}
	return "p" // cannot happen for a valid key: every key, to be safe
}

// prefixPayload is the invalidation payload of a cleared prefix.
func prefixPayload(prefix string) string {
	if p := "p" + hex.EncodeToString([]byte(prefix)); len(p) <= maxPayload {
		return p
	}
	return "p"
}

// parseInvalidation reads a payload of the invalidation channel.
func parseInvalidation(payload string) (store.Invalidation, bool) {
	if payload == "" {
		return store.Invalidation{}, false
	}
	b, err := hex.DecodeString(payload[1:])
	if err != nil {
		return store.Invalidation{}, false
	}
	switch payload[0] {
	case 'k':
		return store.Invalidation{Key: string(b)}, true
	case 'p':
		return store.Invalidation{Key: string(b), Prefix: true}, true
	}
	return store.Invalidation{}, false
}

// SubscribeInvalidations implements [store.Invalidator]: fn receives each
// key a Forget of any store on the same table deleted, each prefix given
// to InvalidatePrefix, and Lost after the listening connection was lost
// and made again (what was sent meanwhile is lost). It returns once the
// listener listens to the table's invalidation channel; fn is called on
// the listener's goroutine, and must not block.
func (s *Store) SubscribeInvalidations(ctx context.Context, fn func(store.Invalidation)) (func(), error) {
	if fn == nil {
		return nil, fmt.Errorf("%w: pgstore: SubscribeInvalidations with a nil fn", store.ErrInvalidArgument)
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return nil, err
	}
	// The id only names the subscription in s.subs: it is never a channel.
	sub := &subscription{s: s, id: "inval " + hex.EncodeToString(b[:]), channel: s.invalChannel, inval: fn}
	if err := sub.start(ctx); err != nil {
		return nil, err
	}
	return sub.stop, nil
}

// InvalidatePrefix implements [store.Invalidator]: one NOTIFY.
func (s *Store) InvalidatePrefix(ctx context.Context, prefix string) error {
	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	if _, err := s.pool.Exec(ctx, "SELECT pg_notify($1, $2)", s.invalChannel, prefixPayload(prefix)); err != nil {
		return fmt.Errorf("pgstore: notify invalidation: %w", err)
	}
	return nil
}
