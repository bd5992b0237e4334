package memstore

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/idemrt/idem/internal/fence"
	"github.com/idemrt/idem/store"
)

// Claim implements [store.Store].
func (s *Store) Claim(ctx context.Context, key string, req store.ClaimRequest) (store.ClaimResult, error) {
	if err := s.check(ctx, key); err != nil {
		return store.ClaimResult{}, err
	}
	if err := store.CheckClaim(req); err != nil {
		return store.ClaimResult{}, err
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	wall := s.clock.Now()
	now := s.tickOf(wall)
	r := sh.live(key, now)
	switch {
	case r == nil:
		if len(sh.records) >= s.perShard {
			switch {
			case sh.evictAbandoned():
				s.evicted.Add(1)
			case s.whenFull == EvictWhenFull && sh.evictResult():
				s.evicted.Add(1)
				s.evictedResults.Add(1)
			case s.whenFull == RefuseWhenFull && sh.hasResult():
				s.refused.Add(1)
				return store.ClaimResult{}, fmt.Errorf("memstore: %w: %d records, all live (Options.MaxRecords)", store.ErrFull, s.perShard*shardCount)
			}
		}
		r = &record{}
		sh.records[key] = r
		s.take(sh, key, r, req, wall, now)
		return store.ClaimResult{Status: store.Claimed, Token: r.token, Attempt: r.attempt, LeaseLeft: req.Lease}, nil
	case r.state == completed:
		return store.ClaimResult{Status: store.Completed, Record: r.result(wall, now)}, nil
	case r.token.Owner == req.Owner:
		return store.ClaimResult{Status: store.Claimed, Token: r.token, Attempt: r.attempt, LeaseLeft: time.Duration(r.leaseUntil - now)}, nil
	case now < r.leaseUntil && (req.Dead == "" || r.token.Owner != req.Dead):
		if req.Waiter != "" && !slices.Contains(r.waiting(), req.Waiter) {
			if r.waiters == nil {
				r.waiters = new([]string)
			}
			*r.waiters = append(*r.waiters, req.Waiter)
		}
		return store.ClaimResult{
			Status:      store.InProgress,
			Token:       store.Token{Fence: r.token.Fence},
			LeaseLeft:   time.Duration(r.leaseUntil - now),
			Fingerprint: r.fp,
			Holder:      r.token.Owner,
		}, nil
	default:
		s.take(sh, key, r, req, wall, now)
		return store.ClaimResult{Status: store.Claimed, Token: r.token, Takeover: true, Attempt: r.attempt, LeaseLeft: req.Lease}, nil
	}
}

// take gives r (new, or in progress under a lease that ended) to req's
// owner, with the store's next fence.
func (s *Store) take(sh *shard, key string, r *record, req store.ClaimRequest, wall time.Time, now tick) {
	r.state = inProgress
	if r.attempt < math.MaxUint32 {
		r.attempt++
	}
	r.token = store.Token{Fence: s.nextFence(wall), Owner: req.Owner}
	r.leaseUntil = now.after(req.Lease)
	r.lease, r.ttl = req.Lease, req.TTL
	r.fp = cloneBytes(req.Fingerprint)
	sh.setRemoveAt(key, r, now, req.Lease+req.TTL)
}

// holder returns the key's in-progress record if tok holds it.
func (sh *shard) holder(key string, tok store.Token, now tick) (*record, error) {
	r := sh.live(key, now)
	if !holds(r, tok) {
		return nil, store.ErrLeaseLost
	}
	return r, nil
}

// holds reports whether r, a live record or nil, is a claim in progress
// held by tok.
func holds(r *record, tok store.Token) bool {
	return r != nil && r.state == inProgress && r.token == tok
}

// Complete implements [store.Store].
func (s *Store) Complete(ctx context.Context, key string, tok store.Token, rec store.Record, ttl time.Duration) (store.Record, error) {
	if err := s.check(ctx, key); err != nil {
		return store.Record{}, err
	}
	if err := store.CheckDuration("ttl", ttl); err != nil {
		return store.Record{}, err
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	wall := s.clock.Now()
	now := s.tickOf(wall)
	// One lookup (and one sweep) for both checks: holder would repeat them.
	r := sh.live(key, now)
	if r != nil && r.state == completed && r.token == tok {
		out := r.result(wall, now)
		sh.mu.Unlock()
		return out, nil
	}
	if !holds(r, tok) {
		sh.mu.Unlock()
		return store.Record{}, store.ErrLeaseLost
	}
	r.state = completed
	r.value, r.failed, r.errText, r.createdAt = cloneBytes(rec.Value), rec.Failed, rec.Error, now
	if !bytes.Equal(rec.Fingerprint, r.fp) {
		r.fp = cloneBytes(rec.Fingerprint)
	}
	sh.setRemoveAt(key, r, now, ttl)
	waiters := r.waiting()
	r.waiters = nil
	out := r.result(wall, now)
	sh.mu.Unlock()
	s.notify(key, waiters)
	return out, nil
}

// Release implements [store.Store].
func (s *Store) Release(ctx context.Context, key string, tok store.Token) error {
	if err := s.check(ctx, key); err != nil {
		return err
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	r := sh.live(key, s.tickOf(s.clock.Now()))
	if r == nil {
		sh.mu.Unlock()
		return nil
	}
	if !holds(r, tok) {
		sh.mu.Unlock()
		return store.ErrLeaseLost
	}
	waiters := r.waiting()
	sh.drop(key, r)
	sh.mu.Unlock()
	s.notify(key, waiters)
	return nil
}

// Renew implements [store.Store].
func (s *Store) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	if err := s.check(ctx, key); err != nil {
		return err
	}
	if err := store.CheckDuration("lease", lease); err != nil {
		return err
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	now := s.tickOf(s.clock.Now())
	r, err := sh.holder(key, tok, now)
	if err != nil {
		return err
	}
	r.leaseUntil = now.after(lease)
	if at := r.leaseUntil.after(r.ttl); at > r.removeAt {
		sh.setRemoveAt(key, r, now, lease+r.ttl)
	}
	return nil
}

// Get implements [store.Store].
func (s *Store) Get(ctx context.Context, key string) (store.Record, error) {
	if err := s.check(ctx, key); err != nil {
		return store.Record{}, err
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	wall := s.clock.Now()
	now := s.tickOf(wall)
	r := sh.live(key, now)
	if r == nil || r.state != completed {
		return store.Record{}, store.ErrNotFound
	}
	return r.result(wall, now), nil
}

// Forget implements [store.Store].
func (s *Store) Forget(ctx context.Context, key string) error {
	if err := s.check(ctx, key); err != nil {
		return err
	}
	sh := s.shardOf(key)
	sh.mu.Lock()
	r := sh.live(key, s.tickOf(s.clock.Now()))
	switch {
	case r == nil:
		sh.mu.Unlock()
		return nil
	case r.state == inProgress:
		sh.mu.Unlock()
		return store.ErrInProgress
	}
	sh.drop(key, r)
	sh.mu.Unlock()
	// After the delete, outside the lock: a subscriber's read of the key
	// started after this call finds nothing.
	s.invalidate(store.Invalidation{Key: key})
	return nil
}

// nextFence returns a fence larger than every fence the store handed out,
// and at least the floor of now (see Store).
func (s *Store) nextFence(now time.Time) uint64 {
	floor := fence.Floor(now)
	for {
		last := s.fence.Load()
		next := max(last+1, floor)
		if s.fence.CompareAndSwap(last, next) {
			return next
		}
	}
}

func cloneBytes(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
