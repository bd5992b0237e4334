package memstore

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/idemrt/idem/store"
)

// maxPage bounds the keys of one page of Scan, whatever the limit asked.
const maxPage = 1 << 16

// scanBudget bounds the records one page of Scan reads: a page moves on to
// the next shard only while it has read fewer.
const scanBudget = 4096

// Scan implements [store.Scanner]. Keys come shard by shard, in byte order
// within a shard; the cursor holds the shard and the last key returned, so
// a key present for the whole scan is returned exactly once. A page locks
// one shard at a time, never the whole store, and reads each record of the
// shards it visits once: its cost is about a 64th of the store per shard
// visited, and a whole scan costs about records²/(64·limit) record reads,
// so page through a large store with a limit in the hundreds or more. A
// page may hold fewer keys than limit, none at all, before the scan ends:
// go on until the cursor is "". Limits over 65,536 count as 65,536.
func (s *Store) Scan(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	if s.closed.Load() {
		return nil, "", store.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if limit <= 0 {
		return nil, "", fmt.Errorf("%w: scan limit %d must be positive", store.ErrInvalidArgument, limit)
	}
	i, after, err := parseCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	limit = min(limit, maxPage)
	now := s.tickOf(s.clock.Now())
	var keys []string
	read := 0
	for i < shardCount {
		need := limit - len(keys)
		got, n := s.shards[i].keysAfter(prefix, after, need, now)
		read += n
		keys = append(keys, got...)
		if len(got) == need { // the shard may hold more
			return keys, formatCursor(i, got[len(got)-1]), nil
		}
		i, after = i+1, ""
		if read >= scanBudget && i < shardCount {
			return keys, formatCursor(i, ""), nil
		}
	}
	return keys, "", nil
}

// keysAfter returns, in byte order, the first n keys of the shard that
// start with prefix and sort after after ("" for none), and how many
// records it read. It keeps at most 2n keys at a time.
func (sh *shard) keysAfter(prefix, after string, n int, now tick) ([]string, int) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	var (
		buf     []string
		bound   string // once full, keys from bound on are not needed
		bounded bool
	)
	for key, r := range sh.records {
		if (after != "" && key <= after) || (bounded && key >= bound) || !strings.HasPrefix(key, prefix) {
			continue
		}
		if r.state == completed && now >= r.removeAt {
			continue // expired, not yet removed
		}
		buf = append(buf, key)
		if len(buf) == 2*n {
			slices.Sort(buf)
			buf = buf[:n]
			bound, bounded = buf[n-1], true
		}
	}
	slices.Sort(buf)
	if len(buf) > n {
		buf = buf[:n]
	}
	return buf, len(sh.records)
}

// A cursor is "<shard>:<last key returned>"; the key is empty at the start
// of a shard (keys are never empty).
func formatCursor(shard int, after string) string {
	return strconv.Itoa(shard) + ":" + after
}

func parseCursor(c string) (shard int, after string, err error) {
	if c == "" {
		return 0, "", nil
	}
	num, after, ok := strings.Cut(c, ":")
	shard, convErr := strconv.Atoi(num)
	if !ok || convErr != nil || shard < 0 || shard >= shardCount {
		return 0, "", fmt.Errorf("%w: memstore: %q is not a scan cursor of this store", store.ErrInvalidArgument, c)
	}
	return shard, after, nil
}
