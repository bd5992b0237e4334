// Command bench is idem's benchmark harness: it runs workloads against idem
// and against the baselines a user would otherwise choose, in one process
// with the same workload, checks that every key ran exactly once, and
// reports throughput, latency, settle latency, store round trips,
// allocations and memory, with ratios and the performance targets.
//
//	go run ./bench                          # ~25 s on the in-memory store
//	go run ./bench -redis 127.0.0.1:6379    # on Redis
//	go run ./bench -redis-cluster host:port,host:port,host:port   # on Redis Cluster
//	go run ./bench -postgres postgres://user@127.0.0.1/db   # on PostgreSQL
//	go run ./bench -redis 127.0.0.1:6379 -postgres DSN       # both, one after the other
//	go run ./bench -out out/                # also report.json and report.html
//	go run ./bench -failover [-wait 1]      # a Redis Cluster of its own, a master SIGKILLed under load
//
// The scenarios: unique (a new key per call), storm (-storm callers per
// key at once), replay (completed keys), zipf (a skewed mix), slow (a slow
// function with duplicates in flight) and xstorm (-xstorm callers per key
// spread over -instances runtimes sharing a Redis or PostgreSQL store; its
// settle latency runs from the owner's completion). On Redis, each result
// carries the server's CPU per call (INFO cpu and commandstats, summed over
// a cluster's masters). On PostgreSQL, tx-unique and tx-zipf measure the
// transactional path: a function that writes a row, through idem.Do,
// through pgtx.Do and by hand, alternating in rounds, each key's rows
// counted after (txpath.go). After the scenarios it counts, on each store,
// the extra store traffic of early takeover: liveness beats a second per
// idle instance, and liveness reads a second while callers wait on another
// instance's keys. The targets table checks issue 15's figures, each as a
// ratio within the same run; those whose store did not run are
// skipped, naming the flag that runs them.
//
// It exits 1 when a key ran more than once, a call got another key's
// result or a tx scenario left a key with other than one row, and 2 on bad
// flags.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"golang.org/x/term"

	"github.com/idemrt/idem/idemprom"
)

func main() { os.Exit(realMain(os.Args[1:])) }

func realMain(args []string) int {
	cfg, err := parseFlags(args, os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		fmt.Fprintf(os.Stderr, "bench: %v\nrun 'go run ./bench -h' for the flags\n", err)
		return 2
	}
	if cfg.CPUProfile != "" {
		f, err := os.Create(cfg.CPUProfile)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
		defer pprof.StopCPUProfile()
	}
	if cfg.Out != "" {
		if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 2
		}
	}
	if cfg.Failover {
		fo, err := runFailover(&cfg, os.Stdout)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: failover:", err)
			return 1
		}
		if fo.Wrong > 0 || (cfg.Wait > 0 && fo.RanTwice > 0) {
			fmt.Println("\nFAILED: a call got a wrong result, or a key ran twice although writes were confirmed by WAIT")
			return 1
		}
		return 0
	}
	rep, err := runAll(context.Background(), cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		return 1
	}
	if cfg.Out != "" {
		if err := writeJSON(cfg.Out, rep); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		if err := writeHTML(cfg.Out, rep); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			return 1
		}
		fmt.Printf("\nwrote %s/report.json and %s/report.html\n", cfg.Out, cfg.Out)
	}
	if !rep.OK {
		fmt.Println("\nFAILED: a key ran more than once or a call got a wrong result (see above)")
		return 1
	}
	return 0
}

func runAll(ctx context.Context, cfg Config) (*Report, error) {
	rep := &Report{Started: time.Now(), Config: cfg, Machine: machine(), OK: true}
	e := &env{cfg: cfg, prefix: fmt.Sprintf("bench:%d:", time.Now().UnixNano()), tables: new(atomic.Int64)}
	if cfg.Metrics != "" {
		stop, err := serveMetrics(e, cfg.Metrics)
		if err != nil {
			return nil, err
		}
		defer stop()
	}
	if len(cfg.RedisAddrs) > 0 {
		client := e.forStore(cfg.Store).redisClient()
		defer client.Close()
		if err := client.Ping(ctx).Err(); err != nil {
			return nil, fmt.Errorf("cannot reach Redis at %v: %w", cfg.RedisAddrs, err)
		}
		rep.Machine.Redis = redisVersion(ctx, client)
	}
	if cfg.PostgresDSN != "" {
		pool, version, err := openPostgres(ctx, cfg)
		if err != nil {
			return nil, err
		}
		defer pool.Close()
		e.pg, rep.Machine.Postgres = pool, version
		if slices.ContainsFunc(cfg.Scenarios, isTxScenario) {
			if e.pgWork, err = openWorkPool(ctx, cfg); err != nil {
				return nil, err
			}
			defer e.pgWork.Close()
			// The tx scenarios' systems alternate in rounds: connecting
			// in the first round would slow whichever runs first.
			for _, p := range []*pgxpool.Pool{e.pg, e.pgWork} {
				if err := warmPool(ctx, p); err != nil {
					return nil, fmt.Errorf("-postgres: %w", err)
				}
			}
		}
	}
	printHeader(os.Stdout, cfg, rep.Machine)
	if err := runScenarios(ctx, e, rep); err != nil {
		return nil, err
	}
	if !cfg.NoSizes {
		if sz, err := measureSizes(ctx, e.forStore(cfg.Stores[0])); err != nil {
			fmt.Fprintln(os.Stderr, "bench: measuring sizes:", err)
		} else {
			rep.Sizes = append(rep.Sizes, sz)
			printSizes(os.Stdout, rep.Sizes)
		}
	}
	if !cfg.NoLiveness {
		for _, st := range cfg.Stores {
			lt, err := measureLiveness(ctx, e.forStore(st), st)
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench: measuring liveness:", err)
				continue
			}
			rep.Liveness = append(rep.Liveness, lt)
		}
		printLiveness(os.Stdout, rep.Liveness)
	}
	rb := redisBenchmark(ctx, e)
	rep.WorkloadAllocsPerOp = workloadAllocs(e.prefix + "memory:unique:idem:k")
	fmt.Printf("\nthe workload alone allocates %s per call (its key, the result's ID), counted in every allocs/op above\n",
		decimal(rep.WorkloadAllocsPerOp))
	rep.Targets = targets(cfg, rep.Results, rb, rep.WorkloadAllocsPerOp)
	printTargets(os.Stdout, rep.Targets)
	printFailures(os.Stdout, rep.Results)
	rep.Duration = time.Since(rep.Started).Round(time.Millisecond).String()
	return rep, nil
}

func printHeader(w io.Writer, cfg Config, m Machine) {
	fmt.Fprintf(w, "idem benchmark: store %s, %s callers, %s per run, scenarios %s, systems %s\n",
		strings.Join(cfg.Stores, " then "), count(int64(cfg.Concurrency)), duration(cfg.Duration), strings.Join(cfg.Scenarios, ","), strings.Join(cfg.Systems, ","))
	fmt.Fprintf(w, "%s, %s/%s, %s CPUs (GOMAXPROCS %s)%s\n", m.GoVersion, m.OS, m.Arch,
		count(int64(m.CPUs)), count(int64(m.GOMAXPROCS)), cpuSuffix(m.CPUModel))
}

// runScenarios runs every configured system in every configured scenario,
// adds the results to rep and prints each scenario's table. rep.OK turns
// false when a key ran twice or a call got a wrong result.
func runScenarios(ctx context.Context, e *env, rep *Report) error {
	cfg := e.cfg
	var progress *os.File
	if !cfg.NoProgress && term.IsTerminal(int(os.Stderr.Fd())) {
		progress = os.Stderr
	}
	for _, sc := range cfg.Scenarios {
		ran := false
		for _, st := range cfg.Stores {
			es := e.forStore(st)
			var names []string
			for _, name := range cfg.Systems {
				if runsIn(name, st, sc) {
					names = append(names, name)
				}
			}
			if len(names) == 0 {
				continue
			}
			ran = true
			results, err := runStore(ctx, e, es, sc, names, progress)
			if err != nil {
				return err
			}
			for _, res := range results {
				if (res.RanTwiceCount > 0 && !res.Unsafe) || res.WrongResults > 0 || (res.Rows != nil && !res.Rows.OK) {
					rep.OK = false
				}
			}
			rep.Results = append(rep.Results, results...)
		}
		if !ran {
			printSkipped(os.Stdout, sc, cfg.Stores)
			continue
		}
		addRatios(rep.Results)
		printScenario(os.Stdout, sc, rep.Results)
		printRoundRatios(os.Stdout, sc, rep.Results)
	}
	return nil
}

// runStore runs the systems names in scenario sc on es's store: one after
// the other, or, in a tx scenario, alternating in rounds.
func runStore(ctx context.Context, e, es *env, sc string, names []string, progress *os.File) ([]Result, error) {
	if isTxScenario(sc) {
		return runAlternating(ctx, e, es, sc, names, progress)
	}
	var out []Result
	for _, name := range names {
		res, err := runOne(ctx, e, es, sc, name, progress)
		if err != nil {
			return nil, err
		}
		out = append(out, res)
	}
	return out, nil
}

// runOne runs system name in scenario sc on es's store.
func runOne(ctx context.Context, e, es *env, sc, name string, progress *os.File) (Result, error) {
	st := es.cfg.Store
	newSys := newSystem
	if sc == "xstorm" {
		newSys = newMultiSystem
	}
	sys, err := newSys(name, es, sc)
	if err != nil {
		return Result{}, fmt.Errorf("%s/%s on %s: %w", sc, name, st, err)
	}
	defer sys.close()
	r := &run{cfg: es.cfg, scenario: sc, sys: sys, prefix: fmt.Sprintf("%s%s:%s:%s:k", e.prefix, st, sc, name), tr: newTracker()}
	if progress != nil {
		r.progress = progress
	}
	r.meter = newRedisMeter(es)
	defer r.meter.close()
	res, err := r.execute(ctx)
	res.Unsafe = name == "naive"
	return res, err
}

// openPostgres opens the pool of -postgres, sized for the callers (unless
// the connection string sets pool_max_conns), and returns the server's
// version.
func openPostgres(ctx context.Context, cfg Config) (*pgxpool.Pool, string, error) {
	pc, err := pgxpool.ParseConfig(cfg.PostgresDSN)
	if err != nil {
		return nil, "", fmt.Errorf("-postgres: %w", err)
	}
	if !strings.Contains(cfg.PostgresDSN, "pool_max_conns") {
		pc.MaxConns = int32(min(max(cfg.Concurrency, 4), 64))
	}
	pool, err := pgxpool.NewWithConfig(ctx, pc)
	if err != nil {
		return nil, "", fmt.Errorf("-postgres: %w", err)
	}
	var version string
	if err := pool.QueryRow(ctx, "SHOW server_version").Scan(&version); err != nil {
		pool.Close()
		return nil, "", fmt.Errorf("cannot reach PostgreSQL at %s: %w", cfg.Postgres, err)
	}
	return pool, version, nil
}

// redisBenchmark runs redis-benchmark on the claim script when the store
// is Redis, -redis-benchmark is on and idem ran the unique scenario, the
// one run its target compares with; otherwise it returns nil. It deletes
// the keys it wrote.
func redisBenchmark(ctx context.Context, e *env) *redisBenchResult {
	cfg := e.cfg
	if len(cfg.RedisAddrs) == 0 || !cfg.RedisBench || !slices.Contains(cfg.Scenarios, "unique") ||
		!slices.Contains(cfg.Systems, "idem") {
		return nil
	}
	client := e.redisClient()
	rb := runRedisBenchmark(ctx, cfg, loadInto(client))
	if cfg.Store == "redis" {
		if err := unlinkMatching(ctx, client, redisBenchKeys); err != nil {
			fmt.Fprintln(os.Stderr, "bench: deleting redis-benchmark's keys:", err)
		}
	}
	client.Close()
	if rb.err == nil {
		fmt.Printf("\nredis-benchmark, claim script pipelined (-c 50 -P 16): %s claims/s\n", si(rb.claimsPerSec))
	}
	return rb
}

// printFailures lists the results that ran a key more than once or gave a
// call a wrong result.
func printFailures(w io.Writer, results []Result) {
	for _, r := range results {
		if r.RanTwiceCount > 0 {
			note := ""
			if r.Unsafe {
				note = " (an unsafe baseline: not a failure)"
			}
			fmt.Fprintf(w, "\n%s/%s: %s keys ran more than once%s, e.g. %s\n", r.Scenario, r.System, count(r.RanTwiceCount), note, strings.Join(r.RanTwice, ", "))
		}
		if r.WrongResults > 0 {
			fmt.Fprintf(w, "\n%s/%s: %s calls got a wrong result: %s\n", r.Scenario, r.System, count(r.WrongResults), r.FirstError)
		}
		if c := r.Rows; c != nil && !c.OK {
			fmt.Fprintf(w, "\n%s/%s: rows not one per key: %s keys with more than one, %s keys completed without one, %s stray rows, e.g. %s\n",
				r.Scenario, r.System, count(c.Twice), count(c.Missing), count(c.Stray), strings.Join(c.Examples, "; "))
		}
		if r.NegativeSettles > 0 {
			fmt.Fprintf(w, "\n%s/%s: %s settle samples came out negative (a later execution of the key returned after the duplicate), counted as 0\n",
				r.Scenario, r.System, count(r.NegativeSettles))
		}
	}
}

// serveMetrics serves the idem systems' metrics at addr/metrics until stop.
func serveMetrics(e *env, addr string) (stop func(), err error) {
	e.col = idemprom.New(idemprom.Options{})
	reg := prometheus.NewRegistry()
	reg.MustRegister(e.col, collectors.NewGoCollector())
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("-metrics %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	fmt.Printf("serving idem's metrics on http://%s/metrics\n", ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}

func cpuSuffix(model string) string {
	if model == "" {
		return ""
	}
	return ", " + model
}

func machine() Machine {
	m := Machine{GoVersion: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH,
		CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

func redisVersion(ctx context.Context, c redis.UniversalClient) string {
	info, err := c.Info(ctx, "server").Result()
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return ""
}
