package idem_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/handoff"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
	"github.com/idemrt/idem/store/redisstore"
)

// The goroutine hand-offs of an executed Do: one call of a new key, with
// no waiters, that runs its function and stores the result. Each one is
// listed with its reason in docs/architecture.md ("Hand-offs of an
// executed Do") and internal/handoff; this test pins the list, so that a
// change adding a hop (or removing one) says so.
//
// (Not the hand-off of a key from an owner to a waiter: see
// handoff_test.go.)
func TestHandoffsOfAnExecutedDo(t *testing.T) {
	const (
		Request     = handoff.Request
		Reply       = handoff.Reply
		Run         = handoff.Run
		Finish      = handoff.Finish
		OwnerAnswer = handoff.OwnerAnswer
		Batch       = handoff.Batch
		BatchDone   = handoff.BatchDone
	)
	srv := redistest.Start(t, redistest.Options{})
	client := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { client.Close() })

	stores := []struct {
		name string
		new  func(t *testing.T) store.Store
	}{
		{"memory", func(t *testing.T) store.Store { return memstore.New(memstore.Options{}) }},
		{"redis", func(t *testing.T) store.Store {
			s, err := redisstore.New(bg, client, redisstore.Options{KeyPrefix: "hops:" + t.Name() + ":"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { s.Close() })
			return s
		}},
	}
	calls := []struct {
		name        string
		cancellable bool
		opts        []idem.CallOption
	}{
		{"background", false, nil},
		{"cancellable", true, nil},
		{"cancellable, owner waits", true, []idem.CallOption{idem.WithOwnerWaits()}},
		{"short lease", false, []idem.CallOption{idem.WithLease(500 * time.Millisecond)}},
	}
	want := map[string][]handoff.Point{
		// The caller claims the key in the store itself (an in-process
		// store whose owners complete their keys), completes it and
		// caches the result: the shard hears nothing of it (see
		// actors/direct.go). Only a run apart from its caller is handed
		// over.
		"memory/background":               {},
		"memory/cancellable":              {Run, OwnerAnswer},
		"memory/cancellable, owner waits": {},
		// A lease too short for that (renewed before the shard would
		// hear of the owner): the claim is answered on the shard's
		// goroutine; the owner completes the key itself, answers itself,
		// and tells the shard.
		"memory/short lease": {Request, Reply, Finish},
		// The claim and the Complete each go to the I/O worker and back.
		"redis/background":               {Request, Batch, BatchDone, Reply, Finish, Batch, BatchDone, Reply},
		"redis/cancellable":              {Request, Batch, BatchDone, Reply, Run, Finish, Batch, BatchDone, Reply},
		"redis/cancellable, owner waits": {Request, Batch, BatchDone, Reply, Finish, Batch, BatchDone, Reply},
		"redis/short lease":              {Request, Batch, BatchDone, Reply, Finish, Batch, BatchDone, Reply},
	}
	for _, st := range stores {
		for _, c := range calls {
			name := st.name + "/" + c.name
			t.Run(name, func(t *testing.T) {
				rt := idemtest.Runtime(t, idem.Options{Store: st.new(t), Shards: 1})
				ctx := context.Background()
				if c.cancellable {
					var cancel context.CancelFunc
					ctx, cancel = context.WithCancel(ctx)
					defer cancel()
				}
				// A first key, so that what starts once per shard (its I/O
				// worker) is not counted.
				if _, err := idem.Do(ctx, rt, "warm-up", idemtest.Value("v"), c.opts...); err != nil {
					t.Fatal(err)
				}
				got := countHandoffs(t, rt, func() {
					v, err := idem.Do(ctx, rt, "new-key", idemtest.Value("v"), c.opts...)
					if v != "v" || err != nil {
						t.Fatalf("Do: %q, %v", v, err)
					}
				})
				if !slices.Equal(got, want[name]) {
					t.Errorf("the goroutine hand-offs of an executed Do on %s changed:\n"+
						"got  %d: %v\nwant %d: %v\n"+
						"Each hand-off costs a wake-up and needs a reason: give a new one its reason in internal/handoff "+
						"and docs/architecture.md (\"Hand-offs of an executed Do\") and list it here, or remove it.",
						name, len(got), got, len(want[name]), want[name])
				}
			})
		}
	}
}

// countHandoffs returns the hand-offs noted while call runs and until rt's
// shards hold no key (a Finish nobody waits for may still be handled when
// Do returns).
func countHandoffs(t *testing.T, rt *idem.Runtime, call func()) []handoff.Point {
	t.Helper()
	var mu sync.Mutex
	var got []handoff.Point
	restore := handoff.Set(func(p handoff.Point) {
		mu.Lock()
		got = append(got, p)
		mu.Unlock()
	})
	defer restore()
	call()
	idemtest.Eventually(t, "the shard forgets the key", func() bool { return rt.Stats().InFlight == 0 })
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(got)
}
