package main

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// naiveSystem is the hand-written unsafe baseline on Redis: claim a key
// with SET key owner NX PX lease, complete it with SET key value PX ttl,
// replay it with GET. It has no fencing (an owner whose lease ran out
// overwrites its successor's result) and no wake-up: a duplicate polls
// GET every 2 ms until a value appears or -settle runs out. A key
// may run twice under takeovers; the harness reports that but does not
// fail the run for it (Result.Unsafe).
type naiveSystem struct {
	client   redis.UniversalClient
	interval time.Duration
	settle   time.Duration
	lease    time.Duration
	owners   atomic.Int64
	calls    atomic.Int64
}

// naiveOwnerPrefix starts the value of a claimed key; a completed key
// holds the result's JSON.
const naiveOwnerPrefix = "\x00owner:"

// naivePoll is how often a naive duplicate reads the key again.
const naivePoll = 2 * time.Millisecond

func newNaiveSystem(e *env) (system, error) {
	if e.cfg.Store != "redis" && e.cfg.Store != "redis-cluster" {
		return nil, errors.New("the naive baseline runs on Redis only")
	}
	return &naiveSystem{client: e.redisClient(), interval: naivePoll, settle: e.cfg.Settle, lease: time.Minute}, nil
}

func (s *naiveSystem) name() string { return "naive" }

func (s *naiveSystem) do(ctx context.Context, key string, fn workFn, _ bool) (receipt, outcome, error) {
	owner := naiveOwnerPrefix + strconv.FormatInt(s.owners.Add(1), 36)
	deadline := time.Now().Add(s.settle)
	polled := false
	for {
		s.calls.Add(1)
		ok, err := s.client.SetNX(ctx, key, owner, s.lease).Result()
		if err != nil {
			return receipt{}, noOutcome, err
		}
		if ok {
			return s.own(ctx, key, fn)
		}
		r, out, err := s.wait(ctx, key, deadline, polled)
		if out != noOutcome || err != nil {
			return r, out, err
		}
		polled = true // the key vanished meanwhile: claim it again
	}
}

// own runs fn for a key this call claimed and stores its result.
func (s *naiveSystem) own(ctx context.Context, key string, fn workFn) (receipt, outcome, error) {
	r, err := fn(ctx)
	if err != nil {
		s.calls.Add(1)
		s.client.Del(ctx, key) // unfenced: may drop a successor's claim
		return r, executed, err
	}
	data, err := json.Marshal(r)
	if err != nil {
		return r, executed, err
	}
	s.calls.Add(1)
	return r, executed, s.client.Set(ctx, key, data, 24*time.Hour).Err()
}

// wait polls GET on key until it holds a result (replayed, or joined when
// this call waited for it), vanishes (noOutcome, no error), or deadline
// passes.
func (s *naiveSystem) wait(ctx context.Context, key string, deadline time.Time, polled bool) (receipt, outcome, error) {
	for {
		s.calls.Add(1)
		v, err := s.client.Get(ctx, key).Result()
		switch {
		case errors.Is(err, redis.Nil):
			return receipt{}, noOutcome, nil
		case err != nil:
			return receipt{}, noOutcome, err
		case !strings.HasPrefix(v, naiveOwnerPrefix):
			var r receipt
			err := json.Unmarshal([]byte(v), &r)
			out := replayed
			if polled {
				out = joined
			}
			return r, out, err
		}
		if time.Now().After(deadline) {
			return receipt{}, noOutcome, errSettle
		}
		polled = true
		select {
		case <-time.After(s.interval):
		case <-ctx.Done():
			return receipt{}, noOutcome, ctx.Err()
		}
	}
}

func (s *naiveSystem) storeCalls() (int64, int64) { n := s.calls.Load(); return n, n }

func (s *naiveSystem) close() { s.client.Close() }
