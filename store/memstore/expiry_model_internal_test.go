package memstore

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
)

type modelRec struct {
	inProgress bool
	tok        store.Token
	value      []byte
	fp         []byte
	createdAt  time.Time
	expiresAt  time.Time
}

// TestStoreExpiryAgainstModel drives the store with random claims,
// completions (of many TTLs, more than maxQueues distinct ones, so that
// queues are shared and blocks cross their 256-item boundary), releases,
// Forgets, re-claims of forgotten or expired keys with another TTL, and
// clock moves, against a map model: every Get agrees with the model, and
// every record the store holds has a queue item that will remove it no
// later than its time (and a lease) (or is a claim in progress), so nothing is kept past
// its TTL by a lost item.
func TestStoreExpiryAgainstModel(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(strconv.FormatUint(seed, 10), func(t *testing.T) { t.Parallel(); testStoreExpiryModel(t, seed, 0) })
	}
	// A full store evicts results before their TTL: the model then only
	// loses keys, the store never returns a wrong or expired result.
	for seed := range uint64(3) {
		t.Run("full"+strconv.FormatUint(seed, 10), func(t *testing.T) { t.Parallel(); testStoreExpiryModel(t, seed, 2*shardCount) })
	}
}

func testStoreExpiryModel(t *testing.T, seed uint64, maxRecords int) {
	ctx := context.Background()
	c := clock.NewFake(time.Unix(1_700_000_000, 0))
	s := New(Options{Clock: c, MaxRecords: maxRecords, WhenFull: EvictWhenFull})
	evicts := maxRecords > 0
	rng := rand.New(rand.NewPCG(seed, 99))
	model := map[string]*modelRec{}
	nkeys := []int{50, 300, 3000}[seed%3]
	ttls := make([]time.Duration, 12)
	for i := range ttls {
		ttls[i] = time.Duration(1+i*i) * time.Second
	}
	const lease = 2 * time.Second
	owner := 0
	for step := range 150_000 {
		k := "k" + strconv.Itoa(rng.IntN(nkeys))
		now := c.Now()
		m := model[k]
		if m != nil && !m.inProgress && !now.Before(m.expiresAt) {
			delete(model, k)
			m = nil
		}
		switch op := rng.IntN(100); {
		case op < 35:
			if m != nil && m.inProgress {
				break // no takeovers here
			}
			owner++
			fp := []byte(strconv.Itoa(rng.IntN(3)))
			res, err := s.Claim(ctx, k, store.ClaimRequest{Owner: strconv.Itoa(owner), Lease: lease, TTL: ttls[rng.IntN(len(ttls))], Fingerprint: fp})
			if err != nil {
				t.Fatalf("step %d: Claim(%s): %v", step, k, err)
			}
			if m != nil && evicts && res.Status == store.Claimed {
				m = nil // evicted
			}
			if m != nil {
				if res.Status != store.Completed || !bytes.Equal(res.Record.Value, m.value) {
					t.Fatalf("step %d: Claim(%s) = %v %q, model has %q", step, k, res.Status, res.Record.Value, m.value)
				}
				break
			}
			if res.Status != store.Claimed {
				t.Fatalf("step %d: Claim(%s) = %v, model has none", step, k, res.Status)
			}
			model[k] = &modelRec{inProgress: true, tok: res.Token, fp: fp}
		case op < 60:
			if m == nil || !m.inProgress {
				break
			}
			ttl := ttls[rng.IntN(len(ttls))]
			val := []byte(k + "@" + strconv.Itoa(step))
			fp := m.fp
			if rng.IntN(4) == 0 {
				fp = []byte("other")
			}
			out, err := s.Complete(ctx, k, m.tok, store.Record{Value: val, Fingerprint: fp}, ttl)
			if evicts && errors.Is(err, store.ErrLeaseLost) {
				delete(model, k) // an abandoned claim, evicted
				break
			}
			if err != nil {
				t.Fatalf("step %d: Complete(%s): %v", step, k, err)
			}
			*m = modelRec{tok: m.tok, value: val, fp: fp, createdAt: now, expiresAt: now.Add(ttl)}
			checkRecord(t, step, k, out, m)
			if rng.IntN(8) == 0 { // a retried Complete returns the same
				out, err := s.Complete(ctx, k, m.tok, store.Record{Value: []byte("x")}, ttl)
				if err != nil {
					t.Fatalf("step %d: repeated Complete(%s): %v", step, k, err)
				}
				checkRecord(t, step, k, out, m)
			}
		case op < 68:
			if m == nil || !m.inProgress {
				break
			}
			if err := s.Release(ctx, k, m.tok); err != nil {
				t.Fatalf("step %d: Release(%s): %v", step, k, err)
			}
			delete(model, k)
		case op < 75:
			err := s.Forget(ctx, k)
			if m != nil && m.inProgress {
				if evicts && err == nil {
					delete(model, k) // an abandoned claim, evicted
					break
				}
				if !errors.Is(err, store.ErrInProgress) {
					t.Fatalf("step %d: Forget(%s) of a claim: %v", step, k, err)
				}
				break
			}
			if err != nil {
				t.Fatalf("step %d: Forget(%s): %v", step, k, err)
			}
			delete(model, k)
		case op < 92:
			rec, err := s.Get(ctx, k)
			if m == nil || m.inProgress {
				if !errors.Is(err, store.ErrNotFound) {
					t.Fatalf("step %d: Get(%s) = %q %v, model has none", step, k, rec.Value, err)
				}
				break
			}
			if err != nil && evicts && errors.Is(err, store.ErrNotFound) {
				delete(model, k) // evicted
				break
			}
			if err != nil {
				t.Fatalf("step %d: Get(%s): %v, model expires at %v (now %v)", step, k, err, m.expiresAt, now)
			}
			checkRecord(t, step, k, rec, m)
		default:
			c.Advance(time.Duration(rng.IntN(3000)) * time.Millisecond)
		}
		if step%1000 == 0 {
			checkQueued(t, step, s)
		}
	}
	// Past every TTL, the store ends up holding only the claims in
	// progress, once operations have swept the queues.
	c.Advance(time.Hour)
	claims := 0
	for _, m := range model {
		if m.inProgress {
			claims++
		}
	}
	for i := range 200_000 {
		if _, err := s.Get(ctx, "sweep"+strconv.Itoa(i)); !errors.Is(err, store.ErrNotFound) {
			t.Fatal(err)
		}
	}
	checkQueued(t, -1, s)
	if records, _ := s.Held(); records != claims && !(evicts && records < claims) {
		t.Fatalf("%d records held an hour after every TTL, %d claims in progress", records, claims)
	}
}

func checkRecord(t *testing.T, step int, k string, got store.Record, m *modelRec) {
	t.Helper()
	if !bytes.Equal(got.Value, m.value) || !bytes.Equal(got.Fingerprint, m.fp) || got.Token != m.tok ||
		!got.CreatedAt.Equal(m.createdAt) || !got.ExpiresAt.Equal(m.expiresAt) {
		t.Fatalf("step %d: %s = %q fp %q tok %v created %v expires %v; model %q fp %q tok %v created %v expires %v",
			step, k, got.Value, got.Fingerprint, got.Token, got.CreatedAt, got.ExpiresAt,
			m.value, m.fp, m.tok, m.createdAt, m.expiresAt)
	}
}

// checkQueued checks that every completed record, and every claim with a
// removal time, has a queue item due no later than that time, and that
// each queue's count and head time agree with its blocks. (A Complete may
// leave its claim's item, up to a lease late: see setRemoveAt.)
func checkQueued(t *testing.T, step int, s *Store) {
	t.Helper()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		due := map[*record]tick{}
		for _, q := range sh.expiry {
			n := 0
			for bi, b := range q.blocks {
				from := 0
				if bi == 0 {
					from = q.head
				}
				if bi < len(q.blocks)-1 && len(b) != queueBlock {
					t.Fatalf("step %d: block %d of %d holds %d items", step, bi, len(q.blocks), len(b))
				}
				for _, it := range b[from:] {
					n++
					if at, ok := due[it.rec]; !ok || it.at < at {
						due[it.rec] = it.at
					}
				}
			}
			if n != q.n {
				t.Fatalf("step %d: queue counts %d items, holds %d", step, q.n, n)
			}
			if n > 0 && q.headAt != q.blocks[0][q.head].at {
				t.Fatalf("step %d: queue head at %d, headAt %d", step, q.blocks[0][q.head].at, q.headAt)
			}
		}
		for k, r := range sh.records {
			if r.removeAt == 0 {
				continue
			}
			if at, ok := due[r]; !ok || at > r.removeAt+ticks(r.lease) {
				t.Fatalf("step %d: %s (state %d) removed at %v has no item due by then (%v %d)", step, k, r.state, r.removeAt, ok, at)
			}
		}
		sh.mu.Unlock()
	}
}

// TestExpiryAtBlockBoundaries completes 255, 256, 257 and 513 keys of one
// shard's queue in time order, interleaved with keys of a shorter TTL, and
// checks that each is removed exactly when due, block boundary or not, and
// that the queues are empty afterwards.
func TestExpiryAtBlockBoundaries(t *testing.T) {
	for _, n := range []int{1, 255, 256, 257, 512, 513} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			ctx := context.Background()
			c := clock.NewFake(time.Unix(1_700_000_000, 0))
			s := New(Options{Clock: c})
			// Keys of one shard, so that one queue holds them all.
			var keys []string
			want := s.shardOf("k0")
			for i := 0; len(keys) < n; i++ {
				if k := "k" + strconv.Itoa(i); s.shardOf(k) == want {
					keys = append(keys, k)
				}
			}
			for i, k := range keys {
				ttl := time.Minute
				if i%3 == 0 {
					ttl = time.Second // another queue, due first
				}
				res, err := s.Claim(ctx, k, store.ClaimRequest{Owner: k, Lease: time.Second, TTL: ttl})
				if err != nil {
					t.Fatal(err)
				}
				if _, err := s.Complete(ctx, k, res.Token, store.Record{Value: []byte(k)}, ttl); err != nil {
					t.Fatal(err)
				}
				c.Advance(time.Millisecond)
			}
			check := func(after time.Duration) {
				t.Helper()
				for i, k := range keys {
					ttl := time.Minute
					if i%3 == 0 {
						ttl = time.Second
					}
					_, err := s.Get(ctx, k)
					due := !c.Now().Before(time.Unix(1_700_000_000, 0).Add(time.Duration(i)*time.Millisecond + ttl))
					if due != errors.Is(err, store.ErrNotFound) {
						t.Fatalf("after %v: key %d (ttl %v): %v, due %v", after, i, ttl, err, due)
					}
				}
			}
			check(0)
			for _, d := range []time.Duration{time.Second, 200 * time.Millisecond, time.Minute} {
				c.Advance(d)
				check(d)
			}
			for i := range 2 * n {
				s.Get(ctx, "other"+strconv.Itoa(i))
			}
			checkQueued(t, -1, s)
			if records, queued := s.Held(); records != 0 || queued != 0 {
				t.Fatalf("%d records and %d queue items held after every TTL", records, queued)
			}
		})
	}
}
