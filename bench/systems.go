package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/golang-lru/v2/expirable"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/redis/go-redis/v9"
	"golang.org/x/sync/singleflight"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/idemprom"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
	"github.com/idemrt/idem/store/pgstore"
	"github.com/idemrt/idem/store/redisstore"
)

// receipt is what the benchmarked function returns: a small struct, as a
// payment call would.
type receipt struct {
	ID     string
	Amount int
}

type workFn = func(context.Context) (receipt, error)

type outcome uint8

const (
	noOutcome outcome = iota
	executed
	joined
	replayed
	// deduped: the key had run already and the call returned no result
	// (the by-hand baseline of the tx scenarios keeps none to replay).
	deduped
	numOutcomes
)

func (o outcome) String() string {
	return [...]string{"none", "executed", "joined", "replayed", "deduped"}[o]
}

// system is one way of running a function once per key.
type system interface {
	name() string
	// do runs fn for key. withOutcome asks for the outcome; without it a
	// system may report noOutcome (to spare idem an allocation when the
	// scenario does not need it).
	do(ctx context.Context, key string, fn workFn, withOutcome bool) (receipt, outcome, error)
	// storeCalls returns round trips and operations sent to a store so far.
	storeCalls() (roundTrips, ops int64)
	close()
}

// env is what systems are built from. Its cfg.Store is the store of the
// runs at hand (see forStore).
type env struct {
	cfg    Config
	prefix string              // per run, so that systems never share keys
	col    *idemprom.Collector // with -metrics: the idem systems' observer
	pg     *pgxpool.Pool       // with -postgres: the pool every system's store shares
	// pgWork, with -postgres, is the pool the functions of the tx
	// scenarios write on: apart from the store's, as pgtx.Do asks.
	pgWork *pgxpool.Pool
	tables *atomic.Int64 // names the PostgreSQL tables of the runs
	// pgTable, when set, is the table of every PostgreSQL store made
	// (instances sharing one table); otherwise each gets a new one.
	pgTable string
	// wait is the Redis stores' WaitReplicas (the idem-wait system).
	wait int
}

// forStore returns e for the runs on store, one of cfg.Stores.
func (e *env) forStore(store string) *env {
	c := *e
	c.cfg.Store = store
	return &c
}

func (e *env) redisClient() redis.UniversalClient {
	if e.cfg.Store == "redis-cluster" {
		return redis.NewClusterClient(&redis.ClusterOptions{Addrs: e.cfg.RedisAddrs, PoolSize: 128})
	}
	return redis.NewClient(&redis.Options{Addr: e.cfg.RedisAddrs[0], PoolSize: 128})
}

// newSystem builds the named system for one scenario run.
func newSystem(name string, e *env, scenario string) (system, error) {
	ns := e.prefix + scenario + ":" + name + ":"
	switch name {
	case "idem", "idem-nocache":
		if isTxScenario(scenario) {
			return newTxSystem(name, e, scenario)
		}
		return newIdemSystem(name, e, ns)
	case "idem-wait":
		w := *e
		w.wait = e.cfg.Wait
		return newIdemSystem(name, &w, ns)
	case "mutex-map":
		return &mutexMap{m: map[string]*mmEntry{}}, nil
	case "singleflight+lru":
		return &sfLRU{lru: expirable.NewLRU[string, receipt](65536, nil, 24*time.Hour)}, nil
	case "poll", "plain":
		return newPollSystem(name, e, ns)
	case "naive":
		return newNaiveSystem(e)
	case "pgtx", "by-hand":
		return newTxSystem(name, e, scenario)
	}
	return nil, fmt.Errorf("unknown system %q", name)
}

// redisStore returns a Redis store whose keys start with prefix, on a
// client of its own, which the caller closes.
func (e *env) redisStore(prefix string) (redis.UniversalClient, *redisstore.Store, error) {
	client := e.redisClient()
	st, err := redisstore.New(context.Background(), client, redisstore.Options{KeyPrefix: prefix, WaitReplicas: e.wait})
	if err != nil {
		client.Close()
		return nil, nil, err
	}
	return client, st, nil
}

// pgStore returns a PostgreSQL store on a new table of its own (or on
// e.pgTable, for instances that share it), which closeStore drops: each
// run starts from an empty table.
func (e *env) pgStore() (*pgstore.Store, error) {
	table := e.pgTable
	if table == "" {
		table = fmt.Sprintf("idem_bench_%d_%d", time.Now().Unix(), e.tables.Add(1))
	}
	st, err := pgstore.New(context.Background(), e.pg, pgstore.Options{Table: table})
	if err != nil {
		return nil, err
	}
	if err := st.Migrate(context.Background()); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// sharedStore returns the store of a system on the configured shared
// store (Redis or PostgreSQL), keys under ns; close it with closeStore.
func (e *env) sharedStore(ns string) (redis.UniversalClient, store.Store, error) {
	if e.cfg.Store == "postgres" {
		st, err := e.pgStore()
		return nil, st, err
	}
	return e.redisStore(ns)
}

// closeStore closes a store made by sharedStore (a PostgreSQL store's
// table is dropped, on pool) and its Redis client.
func closeStore(st store.Store, client redis.UniversalClient, pool *pgxpool.Pool) {
	switch st := st.(type) {
	case *redisstore.Store:
		st.Close()
	case *pgstore.Store:
		st.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _ = pool.Exec(ctx, "DROP TABLE IF EXISTS "+st.Table()+", "+st.LiveTable())
	}
	if client != nil {
		client.Close()
	}
}

// idemSystem is the runtime under test.
type idemSystem struct {
	n      string
	rt     *idem.Runtime
	client redis.UniversalClient
	pg     *pgxpool.Pool
	st     store.Store
}

// newIdemSystem builds idem ("idem-nocache": without its result cache) on
// the configured store, keys under ns.
func newIdemSystem(name string, e *env, ns string) (system, error) {
	var client redis.UniversalClient
	var st store.Store
	if e.cfg.Store != "memory" {
		c, s, err := e.sharedStore(ns)
		if err != nil {
			return nil, err
		}
		client, st = c, s
	}
	rt, err := e.newRuntime(name, st)
	if err != nil {
		closeStore(st, client, e.pg)
		return nil, err
	}
	return &idemSystem{n: name, rt: rt, client: client, pg: e.pg, st: st}, nil
}

// newRuntime returns the runtime of idem system name ("idem-nocache":
// without its result cache) on st (nil: the memory store), watched by
// the -metrics collector if there is one.
func (e *env) newRuntime(name string, st store.Store) (*idem.Runtime, error) {
	opts := idem.Options{Policy: idem.Policy{Settle: e.cfg.Settle}, DisableCache: name == "idem-nocache", Shards: e.cfg.Shards, Store: st}
	if e.col != nil {
		opts.Observer = e.col
	}
	rt, err := idem.New(opts)
	if err != nil {
		return nil, err
	}
	if e.col != nil {
		e.col.Watch(rt)
	}
	return rt, nil
}

func (s *idemSystem) name() string { return s.n }

func (s *idemSystem) do(ctx context.Context, key string, fn workFn, withOutcome bool) (receipt, outcome, error) {
	if !withOutcome {
		v, err := idem.Do(ctx, s.rt, key, fn)
		return v, noOutcome, err
	}
	var out idem.Outcome
	v, err := idem.Do(ctx, s.rt, key, fn, idem.WithOutcome(&out))
	return v, outcome(out), err // the two enums share their order
}

func (s *idemSystem) storeCalls() (int64, int64) {
	st := s.rt.Stats()
	return st.Batches, st.Ops
}

func (s *idemSystem) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.rt.Close(ctx)
	closeStore(s.st, s.client, s.pg)
}

// mutexMap is the in-process limit: one mutex, one map of entries that
// hold a result or a channel to wait on, kept forever.
type mutexMap struct {
	mu sync.Mutex
	m  map[string]*mmEntry
}

type mmEntry struct {
	done chan struct{}
	v    receipt
	err  error
}

func (s *mutexMap) name() string { return "mutex-map" }

func (s *mutexMap) do(ctx context.Context, key string, fn workFn, _ bool) (receipt, outcome, error) {
	s.mu.Lock()
	if e, ok := s.m[key]; ok {
		s.mu.Unlock()
		select {
		case <-e.done:
			return e.v, replayed, e.err
		default:
		}
		select {
		case <-e.done:
			return e.v, joined, e.err
		case <-ctx.Done():
			return receipt{}, noOutcome, ctx.Err()
		}
	}
	e := &mmEntry{done: make(chan struct{})}
	s.m[key] = e
	s.mu.Unlock()
	e.v, e.err = fn(ctx)
	if e.err != nil {
		s.mu.Lock()
		delete(s.m, key)
		s.mu.Unlock()
	}
	close(e.done)
	return e.v, executed, e.err
}

func (s *mutexMap) storeCalls() (int64, int64) { return 0, 0 }
func (s *mutexMap) close()                     {}

// sfLRU is what a user would write by hand: singleflight to coalesce the
// callers of a key, an expirable LRU to keep its result.
type sfLRU struct {
	g   singleflight.Group
	lru *expirable.LRU[string, receipt]
}

func (s *sfLRU) name() string { return "singleflight+lru" }

func (s *sfLRU) do(ctx context.Context, key string, fn workFn, _ bool) (receipt, outcome, error) {
	if v, ok := s.lru.Get(key); ok {
		return v, replayed, nil
	}
	ran := false
	v, err, _ := s.g.Do(key, func() (any, error) {
		if v, ok := s.lru.Get(key); ok {
			return v, nil
		}
		ran = true
		r, err := fn(ctx)
		if err == nil {
			s.lru.Add(key, r)
		}
		return r, err
	})
	out := joined
	if ran {
		out = executed
	}
	r, _ := v.(receipt)
	return r, out, err
}

func (s *sfLRU) storeCalls() (int64, int64) { return 0, 0 }
func (s *sfLRU) close()                     {}

// pollSystem claims a key in the store and, when another caller holds it,
// sleeps and claims again until it settles: the original design ("poll")
// every -poll-interval (50 ms by default), or a plain client ("plain") that
// polls every millisecond. Either way, one store call per operation, no
// batching: on PostgreSQL, one statement per round trip.
type pollSystem struct {
	n        string
	inst     string // names this instance in its owners' names
	st       store.Store
	client   redis.UniversalClient
	pg       *pgxpool.Pool
	interval time.Duration
	settle   time.Duration
	owners   atomic.Int64
	calls    atomic.Int64
}

// newPollSystem builds the poll baseline ("plain": polling every
// millisecond) on the configured store, keys under ns.
func newPollSystem(name string, e *env, ns string) (system, error) {
	p := &pollSystem{n: name, interval: e.cfg.PollInterval, settle: e.cfg.Settle, pg: e.pg,
		inst: strconv.FormatInt(pollInstances.Add(1), 36)}
	if name == "plain" {
		p.interval = time.Millisecond
	}
	if e.cfg.Store == "memory" {
		p.st = memstore.New(memstore.Options{})
		return p, nil
	}
	client, st, err := e.sharedStore(ns)
	if err != nil {
		return nil, err
	}
	p.client, p.st = client, st
	return p, nil
}

// pollInstances numbers the poll systems of the process, so that the
// owners of instances sharing a store (xstorm) never share a name: the
// store takes a claim by the same owner for a retry of its own.
var pollInstances atomic.Int64

func (s *pollSystem) name() string { return s.n }

var errSettle = errors.New("settle time ran out")

func (s *pollSystem) do(ctx context.Context, key string, fn workFn, _ bool) (receipt, outcome, error) {
	owner := "poll-" + s.inst + "-" + strconv.FormatInt(s.owners.Add(1), 36)
	deadline := time.Now().Add(s.settle)
	polled := false
	for {
		s.calls.Add(1)
		res, err := s.st.Claim(ctx, key, store.ClaimRequest{Owner: owner, Lease: time.Minute, TTL: 24 * time.Hour})
		if err != nil {
			return receipt{}, noOutcome, err
		}
		switch res.Status {
		case store.Completed:
			var r receipt
			err := json.Unmarshal(res.Record.Value, &r)
			if polled {
				return r, joined, err
			}
			return r, replayed, err
		case store.Claimed:
			r, err := fn(ctx)
			if err != nil {
				s.calls.Add(1)
				_ = s.st.Release(ctx, key, res.Token)
				return r, executed, err
			}
			data, err := json.Marshal(r)
			if err != nil {
				return r, executed, err
			}
			s.calls.Add(1)
			_, err = s.st.Complete(ctx, key, res.Token, store.Record{Value: data}, 24*time.Hour)
			return r, executed, err
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

func (s *pollSystem) storeCalls() (int64, int64) { n := s.calls.Load(); return n, n }

func (s *pollSystem) close() { closeStore(s.st, s.client, s.pg) }
