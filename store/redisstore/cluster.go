package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// On a *redis.ClusterClient the store does its own routing: a batch is
// split by the master that owns each key's slot, in go-redis's slot map,
// and each part goes out as one pipeline on that master's node client,
// all parts at once. A master that is down or slow then delays only its
// own part, and the runtime, which batches each partition apart (see
// [Store.Partition]), keeps the other masters' keys moving.
//
// go-redis reloads its slot map on its own only when a command meets MOVED
// or ASK, or every ClusterStateReloadInterval (a minute by default): a
// dead master's keys would keep going to the dead node for that long. The
// store reloads the map itself whenever a part meets a reply or an error
// that says the map may be stale: MOVED or ASK, CLUSTERDOWN, READONLY (a
// master demoted to a replica), TRYAGAIN, or no reply (a refused dial, a
// dropped connection, a timeout). Reloads are made one at a time and at
// most every minReload; a batch that met such an error waits for the
// reload before [Store.repeat] sends again what its rules allow.

// minReload is the least time between the starts of two slot map reloads.
const minReload = 100 * time.Millisecond

// slotMap reloads a ClusterClient's slot map, one reload at a time.
type slotMap struct {
	cc *redis.ClusterClient

	mu      sync.Mutex
	running chan struct{} // closed when the running reload ends; nil when none runs
	last    time.Time     // when the last reload started
	wg      sync.WaitGroup
	reloads atomic.Uint64

	// parts numbers the master addresses met, for Store.Partition.
	pmu   sync.Mutex
	parts map[string]int
}

// reload starts a reload of the slot map unless one runs or one started
// less than minReload ago, and waits until the running reload ends or ctx
// is done. The reload itself is not bound by ctx (go-redis bounds it by
// the client's timeouts), so that a batch whose context ends does not cut
// short the reload other batches wait for.
func (m *slotMap) reload(ctx context.Context) {
	m.mu.Lock()
	ch := m.running
	if ch == nil && time.Since(m.last) >= minReload {
		ch = make(chan struct{})
		m.running, m.last = ch, time.Now()
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			// ForEachMaster reloads the map before it calls fn (ReloadState
			// only schedules a reload, with no way to wait for it).
			_ = m.cc.ForEachMaster(context.Background(), func(context.Context, *redis.Client) error { return nil })
			m.reloads.Add(1)
			m.mu.Lock()
			m.running = nil
			m.mu.Unlock()
			close(ch)
		}()
	}
	m.mu.Unlock()
	if ch == nil {
		return
	}
	select {
	case <-ch:
	case <-ctx.Done():
	}
}

// wait waits for the reload in flight, if any (see Store.Close).
func (m *slotMap) wait() { m.wg.Wait() }

// partition returns the number of the master that owns key's slot in the
// current slot map; numbers are given to addresses as they are met, so a
// promoted replica gets a number of its own.
func (m *slotMap) partition(key string) int {
	addr := ""
	if n, err := m.cc.MasterForKey(context.Background(), key); err == nil {
		addr = n.Options().Addr
	}
	m.pmu.Lock()
	defer m.pmu.Unlock()
	i, ok := m.parts[addr]
	if !ok {
		if m.parts == nil {
			m.parts = make(map[string]int)
		}
		i = len(m.parts)
		m.parts[addr] = i
	}
	return i
}

// Partition implements [store.Partitioner]: on a cluster client, the
// number of the master that owns key's slot (in go-redis's slot map, as
// the store last reloaded it), so that the runtime batches each master's
// keys apart; 0 on any other client.
func (s *Store) Partition(key string) int {
	if s.slots == nil {
		return 0
	}
	return s.slots.partition(s.keys(key)[0])
}

// staleMap reports whether err says that the slot map may be stale: a
// redirect, a cluster or master down, a write sent to a replica, a slot
// being migrated, or no reply at all.
func staleMap(err error) bool {
	if err == nil || errors.Is(err, redis.Nil) {
		return false
	}
	if _, ok := redis.IsMovedError(err); ok {
		return true
	}
	if _, ok := redis.IsAskError(err); ok {
		return true
	}
	return redis.IsClusterDownError(err) || redis.IsReadOnlyError(err) ||
		redis.IsTryAgainError(err) || redis.IsMasterDownError(err) || replyLost(err)
}

// redirected reports whether err is a MOVED or ASK reply: the call did not
// run, and the node that may run it is named.
func redirected(err error) bool {
	if _, ok := redis.IsMovedError(err); ok {
		return true
	}
	_, ok := redis.IsAskError(err)
	return ok
}

// execCluster sends calls on a cluster client: one pipeline per master, on
// its node client, all at once. Calls that meet MOVED or ASK are sent once
// more through the cluster client's own pipeline, which follows the
// redirect (they did not run). A part that met a stale-map error reloads
// the slot map before execCluster returns.
func (s *Store) execCluster(ctx context.Context, calls []call) {
	type part struct {
		node *redis.Client
		at   []int
	}
	var parts []*part
	byAddr := map[string]*part{}
	var unrouted []int
	for i := range calls {
		node, err := s.slots.cc.MasterForKey(ctx, calls[i].keys[0])
		if err != nil {
			unrouted = append(unrouted, i)
			continue
		}
		addr := node.Options().Addr
		p := byAddr[addr]
		if p == nil {
			p = &part{node: node}
			byAddr[addr] = p
			parts = append(parts, p)
		}
		p.at = append(p.at, i)
	}
	var wg sync.WaitGroup
	for _, p := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub := pick(calls, p.at)
			s.pipeline(ctx, p.node, true, sub)
			keep(calls, p.at, sub)
		}()
	}
	wg.Wait()
	var moved []int
	stale := len(unrouted) > 0
	for _, p := range parts {
		for _, i := range p.at {
			err := calls[i].cmd.Err()
			if redirected(err) {
				moved = append(moved, i)
			}
			stale = stale || staleMap(err)
		}
	}
	moved = append(moved, unrouted...)
	if len(moved) > 0 {
		sub := pick(calls, moved)
		s.pipeline(ctx, s.c, false, sub)
		keep(calls, moved, sub)
	}
	if stale {
		s.slots.reload(ctx)
	}
}
