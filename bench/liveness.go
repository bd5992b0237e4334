package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// LivenessTraffic is the store traffic of early takeover (idem's liveness
// beats and reads; docs/semantics.md, "Early takeover") on one store, with
// default settings: Instances runtimes idle, then the callers of one of
// them waiting on Keys keys another holds.
type LivenessTraffic struct {
	Store     string `json:"store"`
	Instances int    `json:"instances"`
	Keys      int    `json:"keys"`
	// BeatsPerSec is the beats each idle instance sends a second.
	BeatsPerSec float64 `json:"beats_per_sec"`
	// ReadsPerSec is the liveness reads a second of the instance whose
	// callers wait, for the one instance they wait on.
	ReadsPerSec float64 `json:"reads_per_sec"`
}

// livenessWindow is how long each phase is counted.
const livenessWindow = 3 * time.Second

// liveCounter counts the liveness calls of one runtime on a store. It
// hides the store's other capabilities (batches, wake-ups): the runtime
// polls instead, which changes its claims, not its liveness calls.
type liveCounter struct {
	store.Store
	live         store.Liveness
	beats, reads atomic.Int64
}

func (c *liveCounter) Beat(ctx context.Context, instance string, ttl time.Duration) error {
	c.beats.Add(1)
	return c.live.Beat(ctx, instance, ttl)
}

func (c *liveCounter) Live(ctx context.Context, instance string) (bool, error) {
	c.reads.Add(1)
	return c.live.Live(ctx, instance)
}

// measureLiveness counts the liveness traffic of cfg.Instances runtimes
// sharing e's store.
func measureLiveness(ctx context.Context, e *env, storeName string) (LivenessTraffic, error) {
	lt := LivenessTraffic{Store: storeName, Instances: max(e.cfg.Instances, 2), Keys: 50}
	var st store.Store
	if storeName == "memory" {
		st = memstore.New(memstore.Options{})
	} else {
		client, s, err := e.sharedStore(e.prefix + "liveness:")
		if err != nil {
			return lt, err
		}
		st = s
		defer closeStore(s, client, e.pg)
	}
	live, ok := st.(store.Liveness)
	if !ok {
		return lt, fmt.Errorf("the %s store keeps no liveness records", storeName)
	}
	var counters []*liveCounter
	var rts []*idem.Runtime
	defer func() {
		for _, rt := range rts {
			_ = rt.Close(context.WithoutCancel(ctx))
		}
	}()
	for range lt.Instances {
		c := &liveCounter{Store: st, live: live}
		rt, err := idem.New(idem.Options{Store: c})
		if err != nil {
			return lt, err
		}
		counters, rts = append(counters, c), append(rts, rt)
	}
	count := func(f func(*liveCounter) *atomic.Int64) func() int64 {
		var start []int64
		for _, c := range counters {
			start = append(start, f(c).Load())
		}
		return func() int64 {
			var n int64
			for i, c := range counters {
				n += f(c).Load() - start[i]
			}
			return n
		}
	}
	// The idle phase outlasts the runtimes' grace (5s after their first
	// beat), during which a runtime reads no one's liveness.
	const idle = 2 * livenessWindow
	beats := count(func(c *liveCounter) *atomic.Int64 { return &c.beats })
	time.Sleep(idle)
	lt.BeatsPerSec = float64(beats()) / float64(lt.Instances) / idle.Seconds()

	release := make(chan struct{})
	var wg sync.WaitGroup
	defer func() { close(release); wg.Wait() }()
	for i := range lt.Keys {
		key := fmt.Sprint(e.prefix, "liveness:k", i)
		started := make(chan struct{})
		wg.Go(func() {
			_, _ = idem.Do(ctx, rts[0], key, func(context.Context) (int, error) {
				close(started)
				<-release
				return 0, nil
			})
		})
		<-started
		wg.Go(func() {
			_, _ = idem.Do(ctx, rts[1], key, func(context.Context) (int, error) { return 0, nil },
				idem.WithSettle(time.Minute))
		})
	}
	for rts[1].Stats().Waiters < lt.Keys {
		time.Sleep(10 * time.Millisecond)
	}
	reads := count(func(c *liveCounter) *atomic.Int64 { return &c.reads })
	time.Sleep(livenessWindow)
	lt.ReadsPerSec = float64(reads()) / livenessWindow.Seconds()
	return lt, nil
}

func printLiveness(w io.Writer, lts []LivenessTraffic) {
	if len(lts) == 0 {
		return
	}
	fmt.Fprintln(w, "\nliveness (early takeover, default settings): the extra store traffic")
	for _, lt := range lts {
		fmt.Fprintf(w, "  %-14s %.2f beats/s per instance (%d idle instances); %.2f liveness reads/s while %d callers wait on %d keys of one other instance\n",
			lt.Store, lt.BeatsPerSec, lt.Instances, lt.ReadsPerSec, lt.Keys, lt.Keys)
	}
}
