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

// targets checks the performance targets of DESIGN.md §10 against what ran.
// A target whose runs are missing is reported as skipped, with the flags
// that would run it.
func targets(cfg Config, results []Result, rb *redisBenchResult) []Target {
	var out []Target
	ratio := func(name, goal, scenario, a, b string, min float64, onStore string) {
		t := Target{Name: name, Goal: goal}
		ra, rb := find(results, scenario, a), find(results, scenario, b)
		switch {
		case onStore != "" && cfg.Store != onStore && !(onStore == "redis" && cfg.Store == "redis-cluster"):
			t.Skipped = fmt.Sprintf("needs the %s store", onStore)
		case ra == nil || rb == nil || rb.Throughput == 0:
			t.Skipped = fmt.Sprintf("needs scenario %s with systems %s and %s", scenario, a, b)
		default:
			t.Ratio = ra.Throughput / rb.Throughput
			t.Met = t.Ratio >= min
			t.Measured = fmt.Sprintf("%s %.0f/s vs %s %.0f/s", a, ra.Throughput, b, rb.Throughput)
		}
		out = append(out, t)
	}
	ratio("unique keys vs singleflight+LRU", "idem ≥ 1/3 of singleflight+LRU throughput (memory store)",
		"unique", "idem", "singleflight+lru", 1.0/3, "memory")

	storm := Target{Name: fmt.Sprintf("%d-caller duplicate storm", cfg.StormSize), Goal: "one execution per key; settle p99 < 1 ms"}
	if r := find(results, "storm", "idem"); r == nil {
		storm.Skipped = "needs scenario storm with system idem"
	} else {
		storm.Measured = fmt.Sprintf("%d executions for %d keys; settle p99 %.3f ms (mean %.3f ms)",
			r.Executions, r.KeysCompleted, r.Settle.P99/1e3, r.Settle.Mean/1e3)
		if p := find(results, "storm", "poll"); p != nil && p.Settle.Count > 0 {
			storm.Measured += fmt.Sprintf("; poll baseline settle mean %.1f ms", p.Settle.Mean/1e3)
			storm.Ratio = p.Settle.Mean / max(r.Settle.Mean, 1e-9)
		}
		storm.Met = r.Executions == r.KeysCompleted && r.RanTwiceCount == 0 && r.Settle.Count > 0 && r.Settle.P99 < 1000
	}
	out = append(out, storm)

	ratio("Redis unique keys vs a plain client", "idem ≥ 2x one script call per operation, 64 callers",
		"unique", "idem", "plain", 2, "redis")
	pipe := Target{Name: "Redis unique keys vs redis-benchmark", Goal: "idem ≥ 0.6x redis-benchmark pipelining the same scripts"}
	switch r := find(results, "unique", "idem"); {
	case cfg.Store == "memory":
		pipe.Skipped = "needs the redis store"
	case rb == nil || rb.err != nil:
		pipe.Skipped = "redis-benchmark did not run"
		if rb != nil {
			pipe.Skipped += ": " + rb.err.Error()
		}
	case r == nil:
		pipe.Skipped = "needs scenario unique with system idem"
	default:
		// A request is a claim and a finish script of about the same
		// server cost, so the pipelined ceiling is half the claim rate.
		ceiling := rb.claimsPerSec / 2
		pipe.Ratio = r.Throughput / ceiling
		pipe.Met = pipe.Ratio >= 0.6
		pipe.Measured = fmt.Sprintf("idem %.0f requests/s vs redis-benchmark %.0f claims/s pipelined (ceiling %.0f requests/s)",
			r.Throughput, rb.claimsPerSec, ceiling)
	}
	out = append(out, pipe)

	ratio("LRU replay vs replay from Redis", "idem ≥ 20x idem-nocache (replays served by Redis)",
		"replay", "idem", "idem-nocache", 20, "redis")
	ratio("LRU replay vs singleflight+LRU replay", "idem ≥ 1/2 of singleflight+LRU replay throughput",
		"replay", "idem", "singleflight+lru", 0.5, "memory")
	return out
}
