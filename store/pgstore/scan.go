package pgstore

import (
	"context"
	"encoding/hex"
	"fmt"

	"github.com/idemrt/idem/store"
)

// Scan implements [store.Scanner] with keyset pagination on the primary
// key: each page is one indexed range read of the keys that start with
// prefix (bytes compared as bytes), after the cursor's key, in key order,
// so a page costs O(limit) whatever the table's size, and every key present
// for the whole scan comes back exactly once. Rows released or ended are
// left out. The cursor is the last key of the page, in hex; next is "" when
// a page comes back short.
func (s *Store) Scan(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	if limit <= 0 {
		return nil, "", fmt.Errorf("%w: scan limit %d must be positive", store.ErrInvalidArgument, limit)
	}
	if s.isClosed() {
		return nil, "", errClosed
	}
	var after []byte // nil: from the start
	if cursor != "" {
		b, err := hex.DecodeString(cursor)
		if err != nil || len(b) == 0 {
			return nil, "", fmt.Errorf("%w: pgstore: %q is not a scan cursor of this store", store.ErrInvalidArgument, cursor)
		}
		after = b
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	rows, err := s.pool.Query(ctx, s.q.scan, after, []byte(prefix), prefixEnd(prefix), limit)
	if err != nil {
		return nil, "", fmt.Errorf("pgstore: scan: %w", err)
	}
	defer rows.Close()
	keys := make([]string, 0, min(limit, maxScanPrealloc)) // a limit bounds a page; it is not its size
	for rows.Next() {
		var k []byte
		if err := rows.Scan(&k); err != nil {
			return nil, "", fmt.Errorf("pgstore: scan: %w", err)
		}
		keys = append(keys, string(k))
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("pgstore: scan: %w", err)
	}
	if len(keys) < limit {
		return keys, "", nil
	}
	return keys, hex.EncodeToString([]byte(keys[len(keys)-1])), nil
}

// maxScanPrealloc bounds the room a page reserves before its rows come.
const maxScanPrealloc = 1024

// prefixEnd returns the smallest byte string above every string that
// starts with prefix, or nil when there is none (prefix is empty or all
// 0xff bytes).
func prefixEnd(prefix string) []byte {
	end := []byte(prefix)
	for i := len(end) - 1; i >= 0; i-- {
		if end[i] < 0xff {
			end[i]++
			return end[:i+1]
		}
	}
	return nil
}
