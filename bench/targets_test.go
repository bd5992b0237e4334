package main

import (
	"math"
	"strings"
	"testing"
)

// targetByName returns the target called name, failing the test when
// there is none.
func targetByName(t *testing.T, ts []Target, name string) Target {
	t.Helper()
	for _, tg := range ts {
		if tg.Name == name {
			return tg
		}
	}
	t.Fatalf("no target %q", name)
	return Target{}
}

// storeConfig is the configuration of a run on stores, with the defaults.
func storeConfig(stores ...string) Config {
	return Config{Store: stores[0], Stores: stores, Concurrency: 64, StormSize: 1000, Instances: 3, PollInterval: 50e6}
}

func settled(p50, p99 float64) Latency {
	return Latency{Count: 100, P50: p50, P99: p99, Max: p99 * 2}
}

// memoryResults are unique and storm runs in memory: idem at 0.6× of
// singleflight+LRU with 8 allocs/op (6 with a workload of 2), and a storm
// settle p99 1.2× theirs.
func memoryResults() []Result {
	return []Result{
		{Scenario: "unique", System: "idem", Store: "memory", Throughput: 600, AllocsPerOp: 8, Calls: 600},
		{Scenario: "unique", System: "singleflight+lru", Store: "memory", Throughput: 1000, AllocsPerOp: 5},
		{Scenario: "storm", System: "idem", Store: "memory", Executions: 9, KeysCompleted: 9, Settle: settled(500, 1200)},
		{Scenario: "storm", System: "singleflight+lru", Store: "memory", Executions: 9, KeysCompleted: 9, Settle: settled(400, 1000)},
		{Scenario: "storm", System: "poll", Store: "memory", Executions: 9, KeysCompleted: 9, Settle: settled(25000, 50000)},
	}
}

// redisResults are unique and xstorm runs on store (redis or
// redis-cluster).
func redisResults(store string) []Result {
	return []Result{
		{Scenario: "unique", System: "idem", Store: store, Throughput: 40000, Calls: 40000,
			RedisCPU: &RedisCPU{PerRequestUS: 14, StatsPerRequestUS: 8, ScriptCalls: 80000, PerScriptCallUS: 4}},
		{Scenario: "unique", System: "plain", Store: store, Throughput: 30000},
		{Scenario: "unique", System: "naive", Store: store, Throughput: 50000, Unsafe: true},
		{Scenario: "xstorm", System: "idem", Store: store, Executions: 40, KeysCompleted: 40, Settle: settled(300, 3600),
			SettleOther: latencyOf(settled(300, 4000)), SettleSame: latencyOf(settled(50, 200))},
		{Scenario: "xstorm", System: "poll", Store: store, Executions: 9, KeysCompleted: 9, Settle: settled(25000, 51000),
			SettleOther: latencyOf(settled(25000, 51000))},
	}
}

func latencyOf(l Latency) *Latency { return &l }

func checkTarget(t *testing.T, tg Target, met bool, ratio float64, measured ...string) {
	t.Helper()
	if tg.Skipped != "" || tg.Met != met || math.Abs(tg.Ratio-ratio) > 1e-9 {
		t.Errorf("%s: met %v ratio %v skipped %q; want met %v ratio %v", tg.Name, tg.Met, tg.Ratio, tg.Skipped, met, ratio)
	}
	for _, m := range measured {
		if !strings.Contains(tg.Measured, m) {
			t.Errorf("%s: measured %q lacks %q", tg.Name, tg.Measured, m)
		}
	}
}

// On the memory store, the memory targets are checked and every Redis one
// is skipped, naming the flag that runs it.
func TestTargetsMemory(t *testing.T) {
	ts := targets(storeConfig("memory"), memoryResults(), nil, 2)
	if len(ts) != 10 {
		t.Fatalf("%d targets", len(ts))
	}
	checkTarget(t, targetByName(t, ts, "unique keys in memory vs singleflight+LRU"), true, 0.6, "6 allocs/op", "3 allocs/op", "less the workload's own 2")
	checkTarget(t, targetByName(t, ts, "1000-caller duplicate storm"), true, 1.2, "9 executions for 9 keys", "1.2 ms", "poll")
	for _, name := range []string{"Redis server CPU per request", "Redis unique keys vs a plain client",
		"Redis unique keys vs redis-benchmark", "Redis unique keys vs the naive baseline", "duplicates on instances sharing Redis"} {
		if tg := targetByName(t, ts, name); !strings.Contains(tg.Skipped, "-redis host:port") || tg.Met {
			t.Errorf("%s: skipped %q, met %v", name, tg.Skipped, tg.Met)
		}
	}

	// Over a limit, or with a key run twice, a target is not met.
	res := memoryResults()
	res[0].AllocsPerOp = 12.5 // 10.5 of idem's own
	res[2].Executions = 10
	ts = targets(storeConfig("memory"), res, nil, 2)
	checkTarget(t, targetByName(t, ts, "unique keys in memory vs singleflight+LRU"), false, 0.6)
	checkTarget(t, targetByName(t, ts, "1000-caller duplicate storm"), false, 1.2)
	res = memoryResults()
	res[2].Settle.P99 = 1400
	checkTarget(t, targetByName(t, targets(storeConfig("memory"), res, nil, 2), "1000-caller duplicate storm"), false, 1.4)
}

// On Redis (single node or cluster), the CPU, naive, plain and xstorm
// targets are checked; the memory ones are skipped.
func TestTargetsRedis(t *testing.T) {
	for _, store := range []string{"redis", "redis-cluster"} {
		ts := targets(storeConfig(store), redisResults(store), &redisBenchResult{claimsPerSec: 90000}, 2)
		checkTarget(t, targetByName(t, ts, "Redis server CPU per request"), true, 0.8, "8 µs", "2 script calls per request, 4 µs each", "14 µs")
		checkTarget(t, targetByName(t, ts, "Redis unique keys vs a plain client"), false, 40000.0/30000)
		checkTarget(t, targetByName(t, ts, "Redis unique keys vs the naive baseline"), false, 0.8)
		checkTarget(t, targetByName(t, ts, "Redis unique keys vs redis-benchmark"), true, 40000.0/45000)
		checkTarget(t, targetByName(t, ts, "duplicates on instances sharing Redis"), true, 0.8, "40 executions for 40 keys",
			"other instances p50 300 µs, p99 4 ms, max 8 ms over 100", "same instance p99 200 µs over 100", "poll every 50 ms: other instances p99 51 ms")
		if tg := targetByName(t, ts, "unique keys in memory vs singleflight+LRU"); !strings.Contains(tg.Skipped, "memory store") {
			t.Errorf("memory target on %s: %+v", store, tg)
		}
	}
	res := redisResults("redis")
	res[0].RedisCPU.StatsPerRequestUS = 12
	res[3].SettleOther.P99 = 5000
	ts := targets(storeConfig("redis"), res, nil, 2)
	checkTarget(t, targetByName(t, ts, "Redis server CPU per request"), false, 1.2)
	checkTarget(t, targetByName(t, ts, "duplicates on instances sharing Redis"), false, 1)
	if tg := targetByName(t, ts, "Redis unique keys vs redis-benchmark"); !strings.Contains(tg.Skipped, "redis-benchmark did not run") {
		t.Errorf("pipelining without redis-benchmark: %+v", tg)
	}
	// Without the xstorm run, its target says which flags run it.
	if tg := targetByName(t, targets(storeConfig("redis"), res[:3], nil, 2), "duplicates on instances sharing Redis"); tg.Skipped != "needs -scenarios xstorm with -systems idem" {
		t.Errorf("xstorm missing: %+v", tg)
	}
}

// A target is met only on runs without errors, wrong results or keys run
// twice: the -settle 6ms run whose xstorm duplicates mostly failed read
// "met" before. The unsafe naive baseline may run keys twice; its errors
// still make its comparison not met.
func TestTargetsNeedCleanRuns(t *testing.T) {
	res := redisResults("redis")
	res[3].Errors, res[3].FirstError = 1505, "idem: settle timeout: context deadline exceeded"
	ts := targets(storeConfig("redis"), res, nil, 2)
	checkTarget(t, targetByName(t, ts, "duplicates on instances sharing Redis"), false, 0.8,
		"idem: 1,505 errors: idem: settle timeout", "4 ms")

	res = redisResults("redis")
	res[0].WrongResults = 3
	ts = targets(storeConfig("redis"), res, &redisBenchResult{claimsPerSec: 90000}, 2)
	checkTarget(t, targetByName(t, ts, "Redis server CPU per request"), false, 0.8, "idem: 3 wrong results")
	checkTarget(t, targetByName(t, ts, "Redis unique keys vs a plain client"), false, 40000.0/30000, "3 wrong results")
	checkTarget(t, targetByName(t, ts, "Redis unique keys vs redis-benchmark"), false, 40000.0/45000, "3 wrong results")

	res = redisResults("redis")
	res[2].Throughput = 20000
	res[2].RanTwiceCount = 7 // the naive baseline's nature
	ts = targets(storeConfig("redis"), res, nil, 2)
	checkTarget(t, targetByName(t, ts, "Redis unique keys vs the naive baseline"), true, 2)
	res[2].Errors, res[2].FirstError = 2, "dial tcp: connection refused"
	ts = targets(storeConfig("redis"), res, nil, 2)
	checkTarget(t, targetByName(t, ts, "Redis unique keys vs the naive baseline"), false, 2, "naive: 2 errors: dial tcp")

	res = redisResults("redis")
	res[1].RanTwiceCount = 1 // plain claims its keys: a key run twice is a fault
	ts = targets(storeConfig("redis"), res, nil, 2)
	checkTarget(t, targetByName(t, ts, "Redis unique keys vs a plain client"), false, 40000.0/30000, "plain: 1 keys ran more than once")

	mem := memoryResults()
	mem[1].Errors, mem[1].FirstError = 1, "boom"
	mem[3].Errors, mem[3].FirstError = 4, "boom"
	ts = targets(storeConfig("memory"), mem, nil, 2)
	checkTarget(t, targetByName(t, ts, "unique keys in memory vs singleflight+LRU"), false, 0.6, "singleflight+lru: 1 errors: boom")
	checkTarget(t, targetByName(t, ts, "1000-caller duplicate storm"), false, 1.2, "singleflight+lru: 4 errors")
	mem = memoryResults()
	mem[2].Errors, mem[2].FirstError = 1, "boom"
	checkTarget(t, targetByName(t, targets(storeConfig("memory"), mem, nil, 2), "1000-caller duplicate storm"), false, 1.2, "idem: 1 errors")
}

// The xstorm target reads the duplicates on other instances only: a low
// p99 of all duplicates (those on the owner's instance mixed in) does not
// meet it, and without any duplicate on another instance it is skipped.
func TestXStormTargetOtherInstances(t *testing.T) {
	res := redisResults("redis")
	res[3].Settle.P99 = 4500
	res[3].SettleOther.P99 = 5500
	checkTarget(t, targetByName(t, targets(storeConfig("redis"), res, nil, 2), "duplicates on instances sharing Redis"), false, 1.1)
	res[3].SettleOther = &Latency{}
	if tg := targetByName(t, targets(storeConfig("redis"), res, nil, 2), "duplicates on instances sharing Redis"); !strings.Contains(tg.Skipped, "another instance") {
		t.Errorf("no duplicate on another instance: %+v", tg)
	}
}

// Without idem's unique run, the pipelining target asks for it first,
// whether redis-benchmark ran or not.
func TestPipelineTargetNeedsUniqueFirst(t *testing.T) {
	res := redisResults("redis")[3:]
	for _, rb := range []*redisBenchResult{nil, {claimsPerSec: 90000}} {
		tg := targetByName(t, targets(storeConfig("redis"), res, rb, 2), "Redis unique keys vs redis-benchmark")
		if tg.Skipped != "needs -scenarios unique with -systems idem" {
			t.Errorf("redis-benchmark %+v: %+v", rb, tg)
		}
	}
}
