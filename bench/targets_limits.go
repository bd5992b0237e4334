package main

import "fmt"

// The targets of issue 15 that bound a figure rather than compare two
// throughputs: their ratio is the figure over its limit, or idem's figure
// over a baseline's, and they are met at or below 1 (or the limit's
// multiple).

const (
	// redisCPULimitUS bounds the Redis server's CPU per request (claim and
	// complete), from INFO commandstats.
	redisCPULimitUS = 10.0
	// stormSettleLimit bounds idem's storm settle p99 as a multiple of
	// singleflight+LRU's in the same run.
	stormSettleLimit = 1.3
	// xstormSettleLimitUS bounds the settle p99 of duplicates on other
	// instances after the owner completes.
	xstormSettleLimitUS = 5000.0
	// memUniqueLeast and memUniqueAllocs bound idem's unique keys in
	// memory: at least this share of singleflight+LRU's throughput, at most
	// this many allocations per call.
	memUniqueLeast  = 0.5
	memUniqueAllocs = 10.0
)

// redisCPUTarget is met when idem's unique keys on Redis cost the server
// at most redisCPULimitUS per request, by commandstats.
func redisCPUTarget(cfg Config, results []Result) Target {
	t := Target{Name: "Redis server CPU per request",
		Goal: fmt.Sprintf("idem ≤ %s per request (claim + complete), unique keys, INFO commandstats; ratio: µs / limit",
			micros(redisCPULimitUS))}
	st := ranOn(cfg, "redis")
	r := find(results, st, "unique", "idem")
	switch {
	case st == "":
		t.Skipped = needsStore("redis")
	case r == nil:
		t.Skipped = needsRuns("unique", "idem")
	case r.RedisCPU == nil || r.Calls == 0 || r.RedisCPU.ScriptCalls+r.RedisCPU.CommandCalls == 0:
		t.Skipped = "no Redis CPU reading: INFO failed, the server restarted during the run, or it served no command"
	default:
		c := r.RedisCPU
		t.Ratio = c.StatsPerRequestUS / redisCPULimitUS
		t.Met = t.Ratio <= 1
		t.Measured = fmt.Sprintf("%s per request on %s (scripts and SETs; %s script calls per request, %s each); used_cpu, background work included: %s",
			micros(c.StatsPerRequestUS), st, decimal(float64(c.ScriptCalls)/float64(r.Calls)), micros(c.PerScriptCallUS),
			micros(c.PerRequestUS))
		requireClean(&t, r)
	}
	return t
}

// exactlyOnce reports whether r ran every key once, without an error or a
// wrong result, and got its settle measured.
func exactlyOnce(r *Result) bool {
	return r.Executions == r.KeysCompleted && r.RanTwiceCount == 0 && r.Errors == 0 && r.WrongResults == 0 &&
		r.Settle.Count > 0
}

// onceText says how many times r's keys ran.
func onceText(r *Result) string {
	return fmt.Sprintf("%s executions for %s keys", count(r.Executions), count(r.KeysCompleted))
}

// stormTarget is met when idem ran each storm key once and released the
// waiting duplicates with a settle p99 at most stormSettleLimit times
// singleflight+LRU's in the same run (the memory store, where that
// baseline runs).
func stormTarget(cfg Config, results []Result) Target {
	t := Target{Name: fmt.Sprintf("%d-caller duplicate storm", cfg.StormSize),
		Goal: fmt.Sprintf("one execution per key; settle p99 ≤ %s× singleflight+LRU's", decimal(stormSettleLimit))}
	st := ranOn(cfg, "memory")
	r, sf := find(results, st, "storm", "idem"), find(results, st, "storm", "singleflight+lru")
	switch {
	case st == "":
		t.Skipped = needsStore("memory")
	case r == nil || sf == nil:
		t.Skipped = needsRuns("storm", "idem", "singleflight+lru")
	case sf.Settle.Count == 0 || sf.Settle.P99 <= 0:
		t.Skipped = "singleflight+LRU released no waiting duplicate: no settle p99 to compare with"
	default:
		t.Ratio = r.Settle.P99 / sf.Settle.P99
		t.Met = exactlyOnce(r) && t.Ratio <= stormSettleLimit
		t.Measured = fmt.Sprintf("%s; settle p99 idem %s vs singleflight+LRU %s", onceText(r), micros(r.Settle.P99), micros(sf.Settle.P99))
		if p := find(results, st, "storm", "poll"); p != nil && p.Settle.Count > 0 {
			t.Measured += fmt.Sprintf(" (poll baseline %s)", micros(p.Settle.P99))
		}
		requireClean(&t, r, sf)
	}
	return t
}

// xstormTarget is met when idem, with instances sharing Redis, ran each
// key once and released the duplicates on other instances than the
// owner's within xstormSettleLimitUS (p99) of the owner's completion. Those
// on the owner's instance are released in-process, sooner: counted in, they
// lowered the p99 by about a tenth; they are printed apart.
func xstormTarget(cfg Config, results []Result) Target {
	t := Target{Name: "duplicates on instances sharing Redis",
		Goal: fmt.Sprintf("one execution per key; settle p99 on other instances after the owner completes < %s, %d instances; ratio: p99 / limit",
			micros(xstormSettleLimitUS), cfg.Instances)}
	st := ranOn(cfg, "redis")
	r := find(results, st, "xstorm", "idem")
	switch {
	case st == "":
		t.Skipped = needsStore("redis")
	case r == nil:
		t.Skipped = needsRuns("xstorm", "idem")
	case r.SettleOther == nil || r.SettleOther.Count == 0:
		t.Skipped = "no duplicate on another instance than the owner's waited: no settle measured"
	default:
		o, same := r.SettleOther, r.SettleSame
		t.Ratio = o.P99 / xstormSettleLimitUS
		t.Met = exactlyOnce(r) && o.P99 < xstormSettleLimitUS
		t.Measured = fmt.Sprintf("%s on %s; other instances p50 %s, p99 %s, max %s over %s duplicates",
			onceText(r), st, micros(o.P50), micros(o.P99), micros(o.Max), count(o.Count))
		if same != nil && same.Count > 0 {
			t.Measured += fmt.Sprintf("; same instance p99 %s over %s", micros(same.P99), count(same.Count))
		}
		if p := find(results, st, "xstorm", "poll"); p != nil && p.SettleOther != nil && p.SettleOther.Count > 0 {
			t.Measured += fmt.Sprintf(" (poll every %s: other instances p99 %s)", duration(cfg.PollInterval), micros(p.SettleOther.P99))
		}
		requireClean(&t, r)
	}
	return t
}

// memUniqueTarget is met when idem's unique keys in memory reach
// memUniqueLeast of singleflight+LRU's throughput with at most
// memUniqueAllocs allocations per call: the process's mallocs during the
// run over its calls, less workload, the allocations per call of the
// harness's own workload.
func memUniqueTarget(cfg Config, results []Result, workload float64) Target {
	t := Target{Name: "unique keys in memory vs singleflight+LRU",
		Goal: fmt.Sprintf("idem ≥ %s× singleflight+LRU throughput and ≤ %s allocs/op, %d callers",
			decimal(memUniqueLeast), decimal(memUniqueAllocs), cfg.Concurrency)}
	st := ranOn(cfg, "memory")
	r, sf := find(results, st, "unique", "idem"), find(results, st, "unique", "singleflight+lru")
	switch {
	case st == "":
		t.Skipped = needsStore("memory")
	case r == nil || sf == nil || sf.Throughput == 0:
		t.Skipped = needsRuns("unique", "idem", "singleflight+lru")
	default:
		t.Ratio = r.Throughput / sf.Throughput
		own := max(r.AllocsPerOp-workload, 0)
		t.Met = t.Ratio >= memUniqueLeast && own <= memUniqueAllocs
		t.Measured = fmt.Sprintf("idem %s, %s allocs/op vs singleflight+LRU %s, %s allocs/op (less the workload's own %s)",
			rate(r.Throughput), decimal(own), rate(sf.Throughput), decimal(max(sf.AllocsPerOp-workload, 0)), decimal(workload))
		requireClean(&t, r, sf)
	}
	return t
}
