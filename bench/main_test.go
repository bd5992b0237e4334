package main

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"encoding/json"
	"github.com/prometheus/client_golang/prometheus"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemrt/idem/internal/pgtest"
	"github.com/idemrt/idem/internal/redistest"
)

// TestMain shrinks the harness's memory measurement (the tests check that
// it runs and gives sound figures, not what they are) and stops the
// PostgreSQL server the tests share, if one started.
func TestMain(m *testing.M) {
	sizeSample.records, sizeSample.inFlight = 300, 200
	code := m.Run()
	if shared.pg != nil {
		shared.pg.Close()
	}
	os.Exit(code)
}

// shared is the PostgreSQL server of the tests that need one, started by
// the first of them: a database each.
var shared struct {
	once  sync.Once
	pg    *pgtest.Server
	pgErr error
}

// postgresDSN returns the connection string of a new database on the
// shared server.
func postgresDSN(t *testing.T) string {
	t.Helper()
	shared.once.Do(func() { shared.pg, shared.pgErr = pgtest.New(pgtest.Options{}) })
	if shared.pgErr != nil {
		t.Fatal(shared.pgErr)
	}
	return shared.pg.NewDatabase(t)
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-duration", "0s"},
		{"-concurrency", "-1"},
		{"-store", "redis"},
		{"-store", "postgres"},
		{"-postgres", "postgres://127.0.0.1/db", "-store", "memory"},
		{"-redis", "localhost"},
		{"-redis", "a:1", "-redis-cluster", "b:1,c:1"},
		{"-dist", "pareto"},
		{"-dup", "1.5"},
		{"-storm", "1"},
		{"-xstorm", "1"},
		{"-instances", "0"},
		{"-scenarios", "unique,nope"},
		{"-systems", "plain"}, // a Redis-only baseline on the memory store
		{"-postgres", "postgres://127.0.0.1/db", "-systems", "naive"},
		{"-shards", "-2"},
		{"-systems", "pgtx"}, // the transactional path needs -postgres
		{"-redis", "a:1", "-systems", "by-hand"},
		{"-postgres", "postgres://127.0.0.1/db", "-tx-rounds", "0"},
		{"-failover", "-redis", "a:1"}, // it starts its own cluster
		{"-failover", "-wait", "-1"},
		{"-nonsense"},
		{"stray"},
	} {
		var out bytes.Buffer
		if _, err := parseFlags(args, &out); err == nil {
			t.Errorf("%v: accepted", args)
		}
	}
	if code := realMain([]string{"-duration", "-1s"}); code != 2 {
		t.Fatalf("exit code %d for a bad flag, want 2", code)
	}
}

func TestDefaults(t *testing.T) {
	c, err := parseFlags(nil, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	if c.Store != "memory" || len(c.Scenarios) != 8 || len(c.Systems) != 4 || c.Concurrency != 64 || c.StormSize != 1000 ||
		c.XStormSize != 30 || c.Instances != 3 || c.TxRounds != 3 {
		t.Fatalf("defaults: %+v", c)
	}
	c, err = parseFlags([]string{"-redis", "127.0.0.1:6399", "-scenarios", "unique, replay"}, &bytes.Buffer{})
	if err != nil || c.Store != "redis" || len(c.Systems) != 5 || strings.Join(c.Scenarios, ",") != "unique,replay" {
		t.Fatalf("-redis: %+v %v", c, err)
	}
	c, err = parseFlags([]string{"-postgres", "postgres://app:secret@db.example:5433/orders"}, &bytes.Buffer{})
	if err != nil || c.Store != "postgres" || strings.Join(c.Stores, ",") != "postgres" || strings.Join(c.Systems, ",") != "idem,idem-nocache,plain,poll,pgtx,by-hand" {
		t.Fatalf("-postgres: %+v %v", c, err)
	}
	if c.Postgres != "db.example:5433/orders" || strings.Contains(fmt.Sprint(c.Postgres), "secret") {
		t.Fatalf("-postgres in the report: %q", c.Postgres)
	}
	c, err = parseFlags([]string{"-redis", "127.0.0.1:6399", "-postgres", "host=127.0.0.1"}, &bytes.Buffer{})
	if err != nil || c.Store != "redis" || strings.Join(c.Stores, ",") != "redis,postgres" || !slices.Contains(c.Systems, "pgtx") {
		t.Fatalf("-redis and -postgres: %+v %v", c, err)
	}
}

// runShort runs the harness with tiny durations and returns its report.
// The storm's function takes 10 ms, long enough for its duplicates to
// join it on a loaded machine. The liveness traffic (seconds of counting)
// is measured only where a test asks for it, with "-no-liveness=false".
func runShort(t *testing.T, extra ...string) Report {
	dir := t.TempDir()
	args := append([]string{"-no-liveness", "-duration", "50ms", "-storm", "40", "-xstorm", "12", "-keys", "200", "-concurrency", "16",
		"-storm-work", "10ms", "-slow-work", "5ms", "-poll-interval", "5ms", "-no-progress", "-out", dir}, extra...)
	if code := realMain(args); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, "report.html")); err != nil {
		t.Fatal(err)
	}
	return rep
}

// checkReport checks that rep is OK with results results, each of which
// ran every key once, and has every target.
func checkReport(t *testing.T, rep Report, results int) {
	t.Helper()
	if !rep.OK || len(rep.Results) != results {
		t.Fatalf("OK %v, %d results, want %d", rep.OK, len(rep.Results), results)
	}
	for _, r := range rep.Results {
		if r.Unsafe != (r.System == "naive") {
			t.Errorf("%s/%s: unsafe %v", r.Scenario, r.System, r.Unsafe)
		}
		if r.Unsafe {
			if r.Calls == 0 || r.WrongResults > 0 {
				t.Errorf("%s/%s: %d calls, %d wrong", r.Scenario, r.System, r.Calls, r.WrongResults)
			}
			continue // its double runs are shown, not failures
		}
		if r.Calls == 0 || r.Errors > 0 || r.WrongResults > 0 || r.RanTwiceCount > 0 {
			t.Errorf("%s/%s: %d calls, %d errors (%s), %d wrong, %d ran twice", r.Scenario, r.System, r.Calls, r.Errors, r.FirstError, r.WrongResults, r.RanTwiceCount)
		}
		if r.Executions != r.KeysCompleted {
			t.Errorf("%s/%s: %d executions for %d keys", r.Scenario, r.System, r.Executions, r.KeysCompleted)
		}
		if r.Scenario == "storm" && r.System == "idem" && r.Outcomes["joined"] == 0 {
			t.Errorf("storm/idem: nobody joined a run: %v", r.Outcomes)
		}
		if r.Scenario == "xstorm" && (r.Settle.Count == 0 || r.Settle.Max < r.Settle.P99 || r.Store == "memory") {
			t.Errorf("xstorm/%s on %s: settle %+v", r.System, r.Store, r.Settle)
		}
		if r.Scenario == "xstorm" && (r.SettleOther == nil || r.SettleSame == nil ||
			r.SettleOther.Count+r.SettleSame.Count != r.Settle.Count || r.SettleOther.Count == 0) {
			t.Errorf("xstorm/%s on %s: settle split %+v, %+v of %d", r.System, r.Store, r.SettleOther, r.SettleSame, r.Settle.Count)
		}
	}
	if len(rep.Targets) != 10 {
		t.Errorf("%d targets", len(rep.Targets))
	}
}

// checkTargetsRan fails unless the targets named ran (met or not), and
// those named in skipped were skipped for a reason that has the flag.
func checkTargetsRan(t *testing.T, rep Report, ran []string, skipped map[string]string) {
	t.Helper()
	for _, name := range ran {
		if tg := targetByName(t, rep.Targets, name); tg.Skipped != "" || tg.Measured == "" || !(tg.Ratio > 0) {
			t.Errorf("target %q did not run: %+v", name, tg)
		}
	}
	for name, flag := range skipped {
		if tg := targetByName(t, rep.Targets, name); !strings.Contains(tg.Skipped, flag) {
			t.Errorf("target %q: skipped %q, want a mention of %s", name, tg.Skipped, flag)
		}
	}
}

func TestShortRunMemory(t *testing.T) {
	rep := runShort(t, "-no-liveness=false")
	checkReport(t, rep, 5*4) // xstorm skipped: it needs a shared store
	if len(rep.Liveness) != 1 || rep.Liveness[0].Store != "memory" || rep.Liveness[0].BeatsPerSec <= 0 || rep.Liveness[0].ReadsPerSec <= 0 {
		t.Fatalf("liveness traffic: %+v, want beats and reads counted on memory", rep.Liveness)
	}
	checkTargetsRan(t, rep, []string{"unique keys in memory vs singleflight+LRU", "40-caller duplicate storm"},
		map[string]string{"Redis server CPU per request": "-redis", "duplicates on instances sharing Redis": "-redis",
			"Redis unique keys vs the naive baseline": "-redis", "Redis unique keys vs redis-benchmark": "-redis"})
	checkSizes(t, rep)
}

// checkSizes checks the report's Go heap figures and returns them: each
// is the median of its rounds, all positive and finite, or 0 with the
// reason it is unsound (on a loaded machine a free of other memory can
// spoil rounds; heap_test.go checks the figures themselves). Never a
// negative size.
func checkSizes(t *testing.T, rep Report) Sizes {
	t.Helper()
	if len(rep.Sizes) != 1 {
		t.Fatalf("sizes: %+v", rep.Sizes)
	}
	s := rep.Sizes[0]
	if s.System != "idem" || s.Rounds != sizeSample.rounds || s.Records != sizeSample.records || s.InFlightKeys != sizeSample.inFlight {
		t.Errorf("sizes measured over %d rounds of %d records and %d keys: %+v", s.Rounds, s.Records, s.InFlightKeys, s)
	}
	for _, f := range []struct {
		name    string
		v       float64
		rounds  []float64
		unsound string
	}{{"per key in flight", s.BytesPerInFlightKey, s.InFlightRounds, s.InFlightUnsound}, {"per record", s.BytesPerRecord, s.RecordRounds, s.RecordUnsound}} {
		if f.unsound != "" {
			t.Logf("Go heap %s: unsound: %s", f.name, f.unsound)
			if f.v != 0 || len(f.rounds) >= s.Rounds {
				t.Errorf("Go heap %s: %v B (rounds %v) and unsound: %s", f.name, f.v, f.rounds, f.unsound)
			}
			continue
		}
		ok := len(f.rounds) == s.Rounds && f.v == median(f.rounds)
		for _, r := range f.rounds {
			ok = ok && r > 0 && finite(r)
		}
		if !ok {
			t.Errorf("Go heap %s: %v B, rounds %v", f.name, f.v, f.rounds)
		}
	}
	return s
}

func TestShortRunPostgres(t *testing.T) {
	t.Parallel() // the store-backed runs mostly wait on their servers
	dsn := postgresDSN(t)
	rep := runShort(t, "-postgres", dsn, "-scenarios", "unique,xstorm")
	checkReport(t, rep, 4+2) // xstorm: idem and poll
	checkTargetsRan(t, rep, []string{"PostgreSQL unique keys vs a plain client"},
		map[string]string{"Redis server CPU per request": "-redis", "unique keys in memory vs singleflight+LRU": "memory store"})
	if rep.Machine.Postgres == "" {
		t.Error("PostgreSQL version missing")
	}
	for _, r := range rep.Results {
		if r.Store != "postgres" || (r.System == "idem" && r.StoreRoundTrips == 0) {
			t.Errorf("%s/%s on %s: %d store round trips", r.Scenario, r.System, r.Store, r.StoreRoundTrips)
		}
	}
	if s := checkSizes(t, rep); !(s.PostgresBytesPerRecord > 0) || !finite(s.PostgresBytesPerRecord) {
		t.Errorf("%v B per row in PostgreSQL", s.PostgresBytesPerRecord)
	}
	var left int
	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'idem_bench%'").Scan(&left); err != nil || left != 0 {
		t.Errorf("%d tables of the runs left behind (%v)", left, err)
	}
}

// With -redis and -postgres, every scenario runs on both, and idem's rows
// on PostgreSQL carry their ratio to idem on Redis.
func TestShortRunRedisAndPostgres(t *testing.T) {
	t.Parallel() // the store-backed runs mostly wait on their servers
	srv := redistest.Start(t, redistest.Options{})
	rep := runShort(t, "-redis", srv.Addr, "-postgres", postgresDSN(t), "-redis-benchmark=false",
		"-scenarios", "unique", "-systems", "idem,plain")
	if !rep.OK || len(rep.Results) != 4 {
		t.Fatalf("OK %v, %d results", rep.OK, len(rep.Results))
	}
	r := find(rep.Results, "postgres", "unique", "idem")
	if r == nil || r.Ratios["idem on redis"] <= 0 || r.Ratios["plain"] <= 0 {
		t.Fatalf("idem on postgres: %+v", r)
	}
}

func TestShortRunRedis(t *testing.T) {
	t.Parallel() // the store-backed runs mostly wait on their servers
	srv := redistest.Start(t, redistest.Options{})
	rep := runShort(t, "-redis", srv.Addr, "-redis-benchmark=false", "-scenarios", "unique,storm,replay,xstorm")
	checkReport(t, rep, 3*5+2) // xstorm: idem and poll
	checkTargetsRan(t, rep, []string{"Redis server CPU per request", "Redis unique keys vs a plain client",
		"Redis unique keys vs the naive baseline", "duplicates on instances sharing Redis"},
		map[string]string{"unique keys in memory vs singleflight+LRU": "memory store", "Redis unique keys vs redis-benchmark": "redis-benchmark"})
	if rep.Machine.Redis == "" {
		t.Error("Redis version missing")
	}
	for _, r := range rep.Results {
		if r.System == "idem" && r.StoreRoundTrips == 0 {
			t.Errorf("%s/idem made no store round trips", r.Scenario)
		}
		checkRedisCPU(t, r)
	}
	if r := find(rep.Results, "redis", "unique", "idem"); r == nil || r.Ratios["naive"] <= 0 {
		t.Errorf("unique/idem: no ratio to the naive baseline: %+v", r)
	}
	if s := checkSizes(t, rep); !(s.RedisBytesPerRecord > 0) {
		t.Errorf("%v B per record in Redis", s.RedisBytesPerRecord)
	}
}

// On Redis Cluster, the server CPU is summed over the masters, and the
// instances of xstorm share the cluster.
func TestShortRunRedisCluster(t *testing.T) {
	t.Parallel() // the store-backed runs mostly wait on their servers
	c := redistest.StartCluster(t, 3)
	rep := runShort(t, "-redis-cluster", strings.Join(c.Addrs(), ","), "-scenarios", "unique,xstorm", "-systems", "idem,poll")
	checkReport(t, rep, 2*2)
	for _, r := range rep.Results {
		if r.Store != "redis-cluster" {
			t.Errorf("%s/%s on %s", r.Scenario, r.System, r.Store)
		}
		checkRedisCPU(t, r)
	}
	checkTargetsRan(t, rep, []string{"Redis server CPU per request", "duplicates on instances sharing Redis"},
		map[string]string{"Redis unique keys vs a plain client": "-systems idem,plain"})
}

// checkRedisCPU checks the Redis server CPU of a result on Redis: idem's
// claims are script calls, the naive baseline's plain commands.
func checkRedisCPU(t *testing.T, r Result) {
	t.Helper()
	c := r.RedisCPU
	if c == nil || c.PerRequestUS <= 0 || (c.StatsPerRequestUS <= 0 && r.Scenario == "unique") {
		t.Errorf("%s/%s: Redis CPU %+v", r.Scenario, r.System, c)
		return
	}
	if r.Scenario == "unique" && r.System == "idem" && (c.ScriptCalls <= 0 || c.PerScriptCallUS <= 0) {
		t.Errorf("unique/idem: script calls %+v", c)
	}
	if r.System == "naive" && (c.CommandCalls <= 0 || c.PerCommandUS <= 0 || c.ScriptCalls != 0) {
		t.Errorf("%s/naive: commands %+v", r.Scenario, c)
	}
}

// With -metrics the harness serves idem's metrics while it runs.
func TestMetricsFlag(t *testing.T) {
	c, err := parseFlags([]string{"-metrics", "127.0.0.1:0"}, &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{cfg: c, prefix: "m:"}
	stop, err := serveMetrics(e, c.Metrics)
	if err != nil {
		t.Fatal(err)
	}
	defer stop()
	if e.col == nil {
		t.Fatal("no collector")
	}
	sys, err := newSystem("idem", e, "unique")
	if err != nil {
		t.Fatal(err)
	}
	defer sys.close()
	w := newWorker(newTracker(), 0)
	w.call(context.Background(), sys, "m:k", 1, false, time.Now())
	ch := make(chan prometheus.Metric, 100)
	e.col.Collect(ch)
	close(ch)
	n := 0
	for range ch {
		n++
	}
	if n == 0 {
		t.Fatal("the collector reported nothing")
	}
}
