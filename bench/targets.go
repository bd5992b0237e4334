package main

import "fmt"

// find returns the result of system in scenario on store ("": the first
// store that ran it), if it ran.
func find(results []Result, store, scenario, system string) *Result {
	for i := range results {
		r := &results[i]
		if r.Scenario == scenario && r.System == system && (store == "" || r.Store == store) {
			return r
		}
	}
	return nil
}

// addRatios fills each idem row's throughput ratios to the other systems of
// its scenario on its store, and to idem on the other stores of the run
// ("idem on redis").
func addRatios(results []Result) {
	for i := range results {
		r := &results[i]
		if r.System != "idem" {
			continue
		}
		for _, o := range results {
			if o.Scenario != r.Scenario || o.Throughput <= 0 || (o.System == r.System && o.Store == r.Store) {
				continue
			}
			name := o.System
			if o.Store != r.Store {
				if o.System != "idem" {
					continue
				}
				name = "idem on " + o.Store
			}
			if r.Ratios == nil {
				r.Ratios = map[string]float64{}
			}
			r.Ratios[name] = r.Throughput / o.Throughput
		}
	}
}

// ranOn returns the store of the run that onStore names ("redis" also
// stands for redis-cluster), or "" when the run had none.
func ranOn(cfg Config, onStore string) string {
	for _, st := range cfg.Stores {
		if st == onStore || (onStore == "redis" && st == "redis-cluster") {
			return st
		}
	}
	return ""
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
		ratioTarget(cfg, results, "PostgreSQL unique keys vs a plain client", "idem ≥ 2× one statement per operation, 64 callers",
			"unique", "idem", "plain", 2, "postgres"),
	}
}

// ratioTarget is met when the throughput of system a in scenario, divided
// by that of system b, is at least least. With onStore set it needs that
// store ("redis" also accepts redis-cluster).
func ratioTarget(cfg Config, results []Result, name, goal, scenario, a, b string, least float64, onStore string) Target {
	t := Target{Name: name, Goal: goal}
	st := ranOn(cfg, onStore)
	ra, rb := find(results, st, scenario, a), find(results, st, scenario, b)
	switch {
	case st == "":
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
	r := find(results, "", "storm", "idem")
	if r == nil {
		t.Skipped = "needs scenario storm with system idem"
		return t
	}
	t.Measured = fmt.Sprintf("%s executions for %s keys; settle p99 %s (mean %s)",
		count(r.Executions), count(r.KeysCompleted), micros(r.Settle.P99), micros(r.Settle.Mean))
	if p := find(results, r.Store, "storm", "poll"); p != nil && p.Settle.Count > 0 {
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
	switch r := find(results, ranOn(cfg, "redis"), "unique", "idem"); {
	case ranOn(cfg, "redis") == "":
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
