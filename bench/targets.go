package main

import "fmt"

// find returns the result of system in scenario, if it ran.
func find(results []Result, scenario, system string) *Result {
	for i := range results {
		if results[i].Scenario == scenario && results[i].System == system {
			return &results[i]
		}
	}
	return nil
}

// addRatios fills each idem row's throughput ratios to the other systems of
// its scenario.
func addRatios(results []Result) {
	for i := range results {
		r := &results[i]
		if r.System != "idem" {
			continue
		}
		for _, o := range results {
			if o.Scenario == r.Scenario && o.System != r.System && o.Throughput > 0 {
				if r.Ratios == nil {
					r.Ratios = map[string]float64{}
				}
				r.Ratios[o.System] = r.Throughput / o.Throughput
			}
		}
	}
}

// targets checks the performance targets (docs/performance.md, "Targets")
// against what ran.
// A target whose runs are missing is reported as skipped, with the flags
// that would run it.
func targets(cfg Config, results []Result, rb *redisBenchResult) []Target {
	return []Target{
		ratioTarget(cfg, results, "unique keys vs singleflight+LRU", "idem ≥ 1/3 of singleflight+LRU throughput (memory store)",
			"unique", "idem", "singleflight+lru", 1.0/3, "memory"),
		stormTarget(cfg, results),
		ratioTarget(cfg, results, "Redis unique keys vs a plain client", "idem ≥ 2× one script call per operation, 64 callers",
			"unique", "idem", "plain", 2, "redis"),
		pipelineTarget(cfg, results, rb),
		ratioTarget(cfg, results, "LRU replay vs replay from Redis", "idem ≥ 20× idem-nocache (replays served by Redis)",
			"replay", "idem", "idem-nocache", 20, "redis"),
		ratioTarget(cfg, results, "LRU replay vs singleflight+LRU replay", "idem ≥ 1/2 of singleflight+LRU replay throughput",
			"replay", "idem", "singleflight+lru", 0.5, "memory"),
	}
}

// ratioTarget is met when the throughput of system a in scenario, divided
// by that of system b, is at least least. With onStore set it needs that
// store ("redis" also accepts redis-cluster).
func ratioTarget(cfg Config, results []Result, name, goal, scenario, a, b string, least float64, onStore string) Target {
	t := Target{Name: name, Goal: goal}
	ra, rb := find(results, scenario, a), find(results, scenario, b)
	switch {
	case onStore != "" && cfg.Store != onStore && !(onStore == "redis" && cfg.Store == "redis-cluster"):
		t.Skipped = fmt.Sprintf("needs the %s store", onStore)
	case ra == nil || rb == nil || rb.Throughput == 0:
		t.Skipped = fmt.Sprintf("needs scenario %s with systems %s and %s", scenario, a, b)
	default:
		t.Ratio = ra.Throughput / rb.Throughput
		t.Met = t.Ratio >= least
		t.Measured = fmt.Sprintf("%s %s vs %s %s", a, rate(ra.Throughput), b, rate(rb.Throughput))
	}
	return t
}

// stormTarget is met when idem ran each storm key once and released the
// waiting duplicates within 1 ms (p99); its ratio is how much sooner they
// were released than by the poll baseline, on average.
func stormTarget(cfg Config, results []Result) Target {
	t := Target{Name: fmt.Sprintf("%d-caller duplicate storm", cfg.StormSize), Goal: "one execution per key; settle p99 < 1 ms"}
	r := find(results, "storm", "idem")
	if r == nil {
		t.Skipped = "needs scenario storm with system idem"
		return t
	}
	t.Measured = fmt.Sprintf("%s executions for %s keys; settle p99 %s (mean %s)",
		count(r.Executions), count(r.KeysCompleted), micros(r.Settle.P99), micros(r.Settle.Mean))
	if p := find(results, "storm", "poll"); p != nil && p.Settle.Count > 0 {
		t.Measured += fmt.Sprintf("; poll baseline settle mean %s", micros(p.Settle.Mean))
		t.Ratio = p.Settle.Mean / max(r.Settle.Mean, 1e-9)
	}
	t.Met = r.Executions == r.KeysCompleted && r.RanTwiceCount == 0 && r.Settle.Count > 0 && r.Settle.P99 < 1000
	return t
}

// pipelineTarget is met when idem, on Redis, reaches 0.6 of the request
// rate that redis-benchmark's pipelined claim scripts allow.
func pipelineTarget(cfg Config, results []Result, rb *redisBenchResult) Target {
	t := Target{Name: "Redis unique keys vs redis-benchmark", Goal: "idem ≥ 0.6× redis-benchmark pipelining the same scripts"}
	switch r := find(results, "unique", "idem"); {
	case cfg.Store == "memory":
		t.Skipped = "needs the redis store"
	case rb == nil || rb.err != nil:
		t.Skipped = "redis-benchmark did not run"
		if rb != nil {
			t.Skipped += ": " + rb.err.Error()
		}
	case r == nil:
		t.Skipped = "needs scenario unique with system idem"
	default:
		// A request is a claim and a finish script of about the same
		// server cost, so the pipelined ceiling is half the claim rate.
		ceiling := rb.claimsPerSec / 2
		t.Ratio = r.Throughput / ceiling
		t.Met = t.Ratio >= 0.6
		t.Measured = fmt.Sprintf("idem %s requests/s vs redis-benchmark %s claims/s pipelined (ceiling %s requests/s)",
			si(r.Throughput), si(rb.claimsPerSec), si(ceiling))
	}
	return t
}
