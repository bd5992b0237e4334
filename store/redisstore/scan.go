package redisstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/store"
)

var _ store.Scanner = (*Store)(nil)

// A page of Scan makes up to scanCalls SCAN calls for each maxScanCount
// keys of its limit, each with a COUNT of at most maxScanCount.
const (
	scanCalls    = 8
	maxScanCount = 1000
)

// Scan implements [store.Scanner] with SCAN, never KEYS: each call walks
// about as many slots of the keyspace as the page still wants keys, but
// never more than 1000 (its COUNT), and keeps the names that MATCH the
// records of keys starting with prefix. So no call holds the server for
// long (a SCAN with COUNT 1000 takes well under a millisecond, whatever the
// database holds, where one with the COUNT of a huge limit would walk it
// all at once), a page costs O(limit) on the server, and a whole scan
// O(keys in the database), not O(keys in the prefix). A page makes up to 8
// SCAN calls for each 1000 keys of its limit (8 for a limit up to 1000)
// until it has limit keys; it may hold fewer, none at all, before the scan
// ends (a MATCH keeps few names of a large database): go on until the
// cursor is "". A page may hold a few more keys than limit, and a key may
// come back on two pages (SCAN's own guarantee: every key present for the
// whole scan at least once).
//
// On a cluster, Scan walks each master in turn, in the order of their
// addresses; the cursor names the master and its SCAN cursor. A cursor
// whose master is no longer one (a failover) is an error: start the scan
// again. Keys whose slot migrates during the scan may be missed.
//
// Only names of this store's records are returned, as keys (without the
// prefix, the braces and Options.Scope); waiter sets, other prefixes and
// other scopes are left out. The record of a released key lives on to keep
// its fence rising, so a released key may be listed though Inspect finds it
// Absent.
func (s *Store) Scan(ctx context.Context, prefix, cursor string, limit int) ([]string, string, error) {
	if limit <= 0 {
		return nil, "", fmt.Errorf("%w: scan limit %d must be positive", store.ErrInvalidArgument, limit)
	}
	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	nodes, err := s.scanNodes(ctx)
	if err != nil {
		return nil, "", fmt.Errorf("redisstore: scan: %w", err)
	}
	i, pos, err := parseScanCursor(cursor, nodes)
	if err != nil {
		return nil, "", err
	}
	match := s.matchPattern(prefix)
	var keys []string
	seen := make(map[string]struct{})
	budget := scanCalls * ((limit-1)/maxScanCount + 1)
	for calls := 0; calls < budget && len(keys) < limit && i < len(nodes); calls++ {
		count := min(limit-len(keys), maxScanCount)
		names, next, err := nodes[i].c.Scan(ctx, pos, match, int64(count)).Result()
		if err != nil {
			return nil, "", fmt.Errorf("redisstore: scan %s: %w", nodes[i].name(), err)
		}
		for _, name := range names {
			key, ok := s.KeyOf(name)
			if _, dup := seen[key]; !ok || dup || !strings.HasPrefix(key, prefix) {
				continue
			}
			seen[key] = struct{}{}
			keys = append(keys, key)
		}
		if pos = next; pos == 0 {
			i++
		}
	}
	if i == len(nodes) {
		return keys, "", nil
	}
	return keys, formatScanCursor(nodes[i], pos), nil
}

// scanNode is one server that Scan walks: the Redis node, or one master of
// a cluster (addr set).
type scanNode struct {
	addr string
	c    redis.Cmdable
}

func (n scanNode) name() string {
	if n.addr == "" {
		return "the server"
	}
	return n.addr
}

// scanNodes returns the servers to walk: the masters of a cluster sorted
// by address, else the one server.
func (s *Store) scanNodes(ctx context.Context) ([]scanNode, error) {
	cc, ok := s.c.(*redis.ClusterClient)
	if !ok {
		return []scanNode{{c: s.c}}, nil
	}
	var (
		mu    sync.Mutex
		nodes []scanNode
	)
	err := cc.ForEachMaster(ctx, func(_ context.Context, c *redis.Client) error {
		mu.Lock()
		nodes = append(nodes, scanNode{addr: c.Options().Addr, c: c})
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	if len(nodes) == 0 {
		return nil, errors.New("the cluster has no master")
	}
	slices.SortFunc(nodes, func(a, b scanNode) int { return strings.Compare(a.addr, b.addr) })
	return nodes, nil
}

// A cursor is the SCAN cursor in decimal, after "<master address>/" on a
// cluster.
func formatScanCursor(n scanNode, pos uint64) string {
	c := strconv.FormatUint(pos, 10)
	if n.addr == "" {
		return c
	}
	return n.addr + "/" + c
}

// parseScanCursor returns the node a cursor names, by its index in nodes,
// and its SCAN cursor.
func parseScanCursor(cursor string, nodes []scanNode) (int, uint64, error) {
	if cursor == "" {
		return 0, 0, nil
	}
	// A cursor names a master exactly when the store walks a cluster.
	addr, num, named := "", cursor, false
	if i := strings.LastIndexByte(cursor, '/'); i >= 0 {
		addr, num, named = cursor[:i], cursor[i+1:], true
	}
	pos, err := strconv.ParseUint(num, 10, 64)
	if err != nil || named != (nodes[0].addr != "") || named && addr == "" {
		return 0, 0, fmt.Errorf("%w: redisstore: %q is not a scan cursor of this store", store.ErrInvalidArgument, cursor)
	}
	i := slices.IndexFunc(nodes, func(n scanNode) bool { return n.addr == addr })
	if i < 0 {
		return 0, 0, fmt.Errorf("redisstore: scan cursor %q names %s, no longer a master of the cluster (a failover?): start the scan again", cursor, addr)
	}
	return i, pos, nil
}
