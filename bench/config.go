package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

// Config is what the flags set.
type Config struct {
	Store        string        `json:"store"`            // memory, redis, redis-cluster, postgres: the first of Stores
	Stores       []string      `json:"stores,omitempty"` // every store of the run, in order; more than one with -redis and -postgres
	RedisAddrs   []string      `json:"redis_addrs,omitempty"`
	PostgresDSN  string        `json:"-"`                  // may hold a password
	Postgres     string        `json:"postgres,omitempty"` // PostgresDSN's host, port and database`
	Duration     time.Duration `json:"duration_per_run"`
	Concurrency  int           `json:"concurrency"`
	Keys         int           `json:"keys"`
	StormSize    int           `json:"storm_size"`
	XStormSize   int           `json:"xstorm_size"` // callers per key in the xstorm scenario, over the instances
	Instances    int           `json:"instances"`   // runtimes sharing the store in the xstorm scenario
	DupRatio     float64       `json:"dup_ratio"`
	Dist         string        `json:"dist"` // uniform or zipf
	Settle       time.Duration `json:"settle"`
	Work         time.Duration `json:"work"`       // time the function takes in most scenarios
	StormWork    time.Duration `json:"storm_work"` // time it takes in the storm scenario
	SlowWork     time.Duration `json:"slow_work"`  // time it takes in the slow scenario
	Scenarios    []string      `json:"scenarios"`
	Systems      []string      `json:"systems"`
	Out          string        `json:"out,omitempty"`
	CPUProfile   string        `json:"cpuprofile,omitempty"`
	NoProgress   bool          `json:"-"`
	RedisBench   bool          `json:"redis_benchmark"`
	PollInterval time.Duration `json:"poll_interval"`
	Shards       int           `json:"shards,omitempty"`      // idem's Options.Shards; 0: its default
	Metrics      string        `json:"metrics,omitempty"`     // address to serve Prometheus metrics on
	TxRounds     int           `json:"tx_rounds"`             // rounds the transactional scenarios alternate their systems in
	NoSizes      bool          `json:"no_sizes,omitempty"`    // the memory per key and per record were not measured
	NoLiveness   bool          `json:"no_liveness,omitempty"` // the store traffic of early takeover was not measured
	// Wait, when positive, adds the system idem-wait: idem on a Redis store
	// with Options.WaitReplicas = Wait, so that its cost shows as a ratio
	// to idem in the same run.
	Wait int `json:"wait_replicas,omitempty"`

	// Failover runs the failover measurement (failover.go) instead of the
	// scenarios, on a Redis Cluster the harness starts itself.
	Failover bool `json:"failover,omitempty"`
}

var allScenarios = []string{"unique", "storm", "replay", "zipf", "slow", "xstorm", "tx-unique", "tx-dup"}

var memorySystems = []string{"idem", "mutex-map", "singleflight+lru", "poll"}

// storeSystems run on a shared store (Redis, PostgreSQL): "plain" makes
// one store call per operation, with no batching.
var storeSystems = []string{"idem", "idem-nocache", "plain", "poll"}

// redisSystems are storeSystems and "naive", the hand-written unsafe
// baseline (SET NX PX, SET PX, GET), which runs on Redis only.
var redisSystems = append(append([]string(nil), storeSystems...), "naive")

// runsOn reports whether system runs on store: naive and idem-wait on
// Redis only, the transactional systems (txOnlySystems) in the tx
// scenarios only.
func runsOn(system, store string) bool {
	if slices.Contains(txOnlySystems, system) {
		return false
	}
	return (system != "naive" && system != "idem-wait") || store == "redis" || store == "redis-cluster"
}

// parseFlags reads args into a Config, or returns an error saying what is
// wrong; usage text goes to out.
func parseFlags(args []string, out io.Writer) (Config, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(out)
	var c Config
	var raw rawFlags
	defineFlags(fs, &c, &raw)
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments: %q", fs.Args())
	}
	storeSet := false
	fs.Visit(func(f *flag.Flag) { storeSet = storeSet || f.Name == "store" })
	if err := c.setStore(raw, storeSet); err != nil {
		return c, err
	}
	if err := c.validate(); err != nil {
		return c, err
	}
	return c, c.pickRuns(raw.scenarios, raw.systems)
}

// rawFlags are the flags that parseFlags turns into Config fields only
// after checking them together.
type rawFlags struct {
	store, redisAddr, clusterAddrs, postgres string
	scenarios, systems                       string
}

// defineFlags defines the harness's flags on fs, to be parsed into c and
// raw.
func defineFlags(fs *flag.FlagSet, c *Config, raw *rawFlags) {
	fs.StringVar(&raw.store, "store", "memory", "store: memory, redis, redis-cluster or postgres (set by -redis / -redis-cluster / -postgres)")
	fs.StringVar(&raw.redisAddr, "redis", "", "address of a Redis server (host:port); selects the redis store")
	fs.StringVar(&raw.clusterAddrs, "redis-cluster", "", "comma-separated addresses of Redis Cluster nodes; selects the redis-cluster store")
	fs.StringVar(&raw.postgres, "postgres", "", "connection string of a PostgreSQL database (postgres://... or key=value); selects the postgres store, "+
		"after the Redis one when -redis or -redis-cluster is given too (the harness makes a table per run and drops it)")
	fs.DurationVar(&c.Duration, "duration", time.Second, "how long each system runs each scenario")
	fs.IntVar(&c.Concurrency, "concurrency", 64, "concurrent callers")
	fs.IntVar(&c.Keys, "keys", 10000, "distinct keys in the replay and zipf scenarios")
	fs.IntVar(&c.StormSize, "storm", 1000, "concurrent callers per key in the storm scenario")
	fs.IntVar(&c.XStormSize, "xstorm", 30, "concurrent callers per key in the xstorm scenario, spread over -instances")
	fs.IntVar(&c.Instances, "instances", 3, "instances (runtimes, each with its own store client) sharing the store in the xstorm scenario")
	fs.Float64Var(&c.DupRatio, "dup", 0.5, "share of calls in the slow and tx-dup scenarios that duplicate a recent key, likely in flight (0..1)")
	fs.StringVar(&c.Dist, "dist", "zipf", "key distribution of the zipf scenario: uniform or zipf")
	fs.DurationVar(&c.Settle, "settle", 3*time.Second, "how long a duplicate waits for a run in flight")
	fs.DurationVar(&c.Work, "work", 0, "time the function takes (most scenarios)")
	fs.DurationVar(&c.StormWork, "storm-work", 5*time.Millisecond, "time the function takes in the storm scenario (the duplicates arrive meanwhile)")
	fs.DurationVar(&c.SlowWork, "slow-work", 20*time.Millisecond, "time the function takes in the slow scenario")
	fs.StringVar(&raw.scenarios, "scenarios", strings.Join(allScenarios, ","), "scenarios to run: "+strings.Join(allScenarios, ","))
	fs.StringVar(&raw.systems, "systems", "", "systems to run (default: all for the store): "+strings.Join(memorySystems, ",")+" | "+strings.Join(redisSystems, ",")+
		" | with -postgres also "+strings.Join(txOnlySystems, ","))
	fs.StringVar(&c.Out, "out", "", "directory to write report.json and report.html to")
	fs.StringVar(&c.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fs.BoolVar(&c.NoProgress, "no-progress", false, "do not print the live progress line")
	fs.BoolVar(&c.RedisBench, "redis-benchmark", true, "with a Redis store, also run redis-benchmark (when on PATH) on the claim script for the pipelining target")
	fs.DurationVar(&c.PollInterval, "poll-interval", 50*time.Millisecond, "sleep between checks of the poll baseline")
	fs.IntVar(&c.Shards, "shards", 0, "idem's shard count (0: its default, 2 × GOMAXPROCS)")
	fs.BoolVar(&c.Failover, "failover", false, "instead of the scenarios, start a Redis Cluster of 3 masters with a replica each (redis-server and redis-cli on PATH), SIGKILL a master under load and report the promotion time, when its slots serve again and the other masters' throughput meanwhile (with -wait n, through WAIT n)")
	fs.IntVar(&c.Wait, "wait", 0, "with a Redis store, also run idem-wait: idem with redisstore's WaitReplicas set to this (the server needs that many replicas), compared with idem")
	fs.StringVar(&c.Metrics, "metrics", "", "serve idem's Prometheus metrics on this address while running, e.g. :9090 (idem then runs with its observer on)")
	fs.BoolVar(&c.NoSizes, "no-sizes", false, "do not measure the memory per key in flight and per stored record after the scenarios")
	fs.BoolVar(&c.NoLiveness, "no-liveness", false, "do not measure the store traffic of early takeover (liveness beats and reads) after the scenarios")
	fs.IntVar(&c.TxRounds, "tx-rounds", 3, "rounds in which the tx scenarios alternate their systems, each round -duration/N per system (after one more, not measured, to warm up)")
}

// setStore sets c.Store, c.Stores, c.RedisAddrs and c.PostgresDSN from
// -store, -redis, -redis-cluster and -postgres; storeSet says whether
// -store was given. -postgres with a Redis flag runs both stores, Redis
// first.
func (c *Config) setStore(raw rawFlags, storeSet bool) error {
	if raw.postgres != "" {
		c.PostgresDSN, c.Postgres = raw.postgres, redactDSN(raw.postgres)
		if raw.redisAddr == "" && raw.clusterAddrs == "" {
			if storeSet && raw.store != "postgres" {
				return fmt.Errorf("-postgres conflicts with -store %s", raw.store)
			}
			c.Store, c.Stores = "postgres", []string{"postgres"}
			return nil
		}
		storeSet = false // two stores: -store names neither
	}
	if err := c.setRedis(raw, storeSet); err != nil {
		return err
	}
	c.Stores = []string{c.Store}
	if c.PostgresDSN != "" {
		c.Stores = append(c.Stores, "postgres")
	}
	return nil
}

// setRedis sets c.Store and c.RedisAddrs from -store, -redis and
// -redis-cluster.
func (c *Config) setRedis(raw rawFlags, storeSet bool) error {
	switch {
	case raw.redisAddr != "" && raw.clusterAddrs != "":
		return errors.New("-redis and -redis-cluster exclude each other")
	case raw.redisAddr != "":
		if storeSet && raw.store != "redis" {
			return fmt.Errorf("-redis conflicts with -store %s", raw.store)
		}
		c.Store, c.RedisAddrs = "redis", []string{raw.redisAddr}
	case raw.clusterAddrs != "":
		if storeSet && raw.store != "redis-cluster" {
			return fmt.Errorf("-redis-cluster conflicts with -store %s", raw.store)
		}
		c.Store = "redis-cluster"
		for _, a := range strings.Split(raw.clusterAddrs, ",") {
			if a = strings.TrimSpace(a); a != "" {
				c.RedisAddrs = append(c.RedisAddrs, a)
			}
		}
	default:
		if raw.store != "memory" {
			return fmt.Errorf("-store %s needs its addresses: use -redis host:port, -redis-cluster host:port,... or -postgres DSN", raw.store)
		}
		c.Store = "memory"
	}
	for _, a := range c.RedisAddrs {
		if !strings.Contains(a, ":") {
			return fmt.Errorf("Redis address %q: want host:port", a)
		}
	}
	return nil
}

// validate checks the numeric flags and -dist.
func (c *Config) validate() error {
	switch {
	case c.Duration <= 0:
		return fmt.Errorf("-duration %v must be positive", c.Duration)
	case c.Concurrency <= 0 || c.Concurrency > 100000:
		return fmt.Errorf("-concurrency %d must be in 1..100000", c.Concurrency)
	case c.Keys <= 0:
		return fmt.Errorf("-keys %d must be positive", c.Keys)
	case c.StormSize <= 1 || c.StormSize > 100000:
		return fmt.Errorf("-storm %d must be in 2..100000", c.StormSize)
	case c.XStormSize < 2 || c.XStormSize > 100000:
		return fmt.Errorf("-xstorm %d must be in 2..100000", c.XStormSize)
	case c.Instances < 1 || c.Instances > 64:
		return fmt.Errorf("-instances %d must be in 1..64", c.Instances)
	case c.DupRatio < 0 || c.DupRatio > 1:
		return fmt.Errorf("-dup %v must be in 0..1", c.DupRatio)
	case c.Dist != "uniform" && c.Dist != "zipf":
		return fmt.Errorf("-dist %q: want uniform or zipf", c.Dist)
	case c.Settle < 0:
		return fmt.Errorf("-settle %v must not be negative", c.Settle)
	case c.Work < 0 || c.SlowWork < 0 || c.StormWork < 0:
		return errors.New("-work, -storm-work and -slow-work must not be negative")
	case c.Shards < 0:
		return fmt.Errorf("-shards %d must not be negative", c.Shards)
	case c.PollInterval <= 0:
		return fmt.Errorf("-poll-interval %v must be positive", c.PollInterval)
	case c.TxRounds < 1 || c.TxRounds > 100:
		return fmt.Errorf("-tx-rounds %d must be in 1..100", c.TxRounds)
	case c.Wait < 0:
		return fmt.Errorf("-wait %d must not be negative", c.Wait)
	case c.Failover && c.Store != "memory":
		return errors.New("-failover starts its own Redis Cluster: leave out -redis, -redis-cluster and -postgres")
	case c.Wait > 0 && c.Store != "redis" && c.Store != "redis-cluster" && !c.Failover:
		return errors.New("-wait needs a Redis store (-redis or -redis-cluster)")
	}
	return nil
}

// redactDSN returns the host, port and database of a PostgreSQL
// connection string, for the report: never its password.
func redactDSN(dsn string) string {
	cfg, err := pgconn.ParseConfig(dsn)
	if err != nil {
		return "(unparsable connection string)"
	}
	return fmt.Sprintf("%s:%d/%s", cfg.Host, cfg.Port, cfg.Database)
}

// pickRuns sets c.Scenarios and c.Systems from the -scenarios and -systems
// lists; no -systems means every system of the store.
func (c *Config) pickRuns(scenarios, systems string) error {
	var err error
	if c.Scenarios, err = pick("scenario", scenarios, allScenarios); err != nil {
		return err
	}
	avail := memorySystems
	switch c.Store {
	case "memory":
	case "redis", "redis-cluster":
		avail = redisSystems
		if c.Wait > 0 {
			avail = append(append([]string(nil), avail...), "idem-wait")
		}
	default:
		avail = storeSystems
	}
	if c.PostgresDSN != "" {
		avail = append(avail[:len(avail):len(avail)], txOnlySystems...)
	}
	if systems == "" {
		c.Systems = avail
		return nil
	}
	c.Systems, err = pick("system", systems, avail)
	return err
}

func pick(what, list string, valid []string) ([]string, error) {
	var out []string
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		ok := false
		for _, v := range valid {
			ok = ok || v == s
		}
		if !ok {
			return nil, fmt.Errorf("unknown %s %q (valid: %s)", what, s, strings.Join(valid, ", "))
		}
		out = append(out, s)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no %s selected", what)
	}
	return out, nil
}
