package main

import (
	"fmt"
	"strings"
)

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
// ("idem on redis"); in the tx scenarios, pgtx's row's instead.
func addRatios(results []Result) {
	for i := range results {
		r := &results[i]
		if r.System == "idem-wait" {
			// WaitReplicas' cost: its throughput as a ratio to idem's.
			for _, o := range results {
				if o.Scenario == r.Scenario && o.Store == r.Store && o.System == "idem" && o.Throughput > 0 {
					r.Ratios = map[string]float64{"idem": r.Throughput / o.Throughput}
				}
			}
			continue
		}
		if r.System != ratioSubject(r.Scenario) {
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

// needsStore says which flags run onStore, as a target's reason to be
// skipped.
func needsStore(onStore string) string {
	switch onStore {
	case "redis":
		return "needs -redis host:port (or -redis-cluster host:port,...)"
	case "postgres":
		return "needs -postgres DSN"
	case "memory":
		return "needs the memory store: run without -redis, -redis-cluster and -postgres"
	}
	return "needs the " + onStore + " store"
}

// needsRuns says which runs a target lacks, as its reason to be skipped.
func needsRuns(scenario string, systems ...string) string {
	return fmt.Sprintf("needs -scenarios %s with -systems %s", scenario, strings.Join(systems, ","))
}

// targets checks the performance targets (docs/performance.md, "Targets";
// issue 15) against what ran. A target whose runs are missing is reported
// as skipped, with the flags that would run it. A target on an absolute
// figure has for ratio the figure over its limit: met at 1 or below.
// workloadAllocs is what the harness's workload allocates per call, left
// out of the bound on idem's allocations.
func targets(cfg Config, results []Result, rb *redisBenchResult, workloadAllocs float64) []Target {
	callers := fmt.Sprintf("%d callers", cfg.Concurrency)
	return []Target{
		redisCPUTarget(cfg, results),
		ratioTarget(cfg, results, "Redis unique keys vs a plain client", "idem ≥ 2× one script call per operation, "+callers,
			"unique", "idem", "plain", 2, "redis"),
		pipelineTarget(cfg, results, rb),
		ratioTarget(cfg, results, "Redis unique keys vs the naive baseline", "idem ≥ 1× hand-written SET NX PX / SET / GET (unsafe), "+callers,
			"unique", "idem", "naive", 1, "redis"),
		stormTarget(cfg, results),
		xstormTarget(cfg, results),
		memUniqueTarget(cfg, results, workloadAllocs),
		ratioTarget(cfg, results, "LRU replay vs replay from Redis", "idem ≥ 20× idem-nocache (replays served by Redis)",
			"replay", "idem", "idem-nocache", 20, "redis"),
		ratioTarget(cfg, results, "LRU replay vs singleflight+LRU replay", "idem ≥ 1/2 of singleflight+LRU replay throughput",
			"replay", "idem", "singleflight+lru", 0.5, "memory"),
		ratioTarget(cfg, results, "PostgreSQL unique keys vs a plain client", "idem ≥ 2× one statement per operation, "+callers,
			"unique", "idem", "plain", 2, "postgres"),
	}
}

// ratioTarget is met when the throughput of system a in scenario, divided
// by that of system b, is at least least. It needs onStore ("redis" also
// accepts redis-cluster).
func ratioTarget(cfg Config, results []Result, name, goal, scenario, a, b string, least float64, onStore string) Target {
	t := Target{Name: name, Goal: goal}
	st := ranOn(cfg, onStore)
	ra, rb := find(results, st, scenario, a), find(results, st, scenario, b)
	switch {
	case st == "":
		t.Skipped = needsStore(onStore)
	case ra == nil || rb == nil || rb.Throughput == 0:
		t.Skipped = needsRuns(scenario, a, b)
	default:
		t.Ratio = ra.Throughput / rb.Throughput
		t.Met = t.Ratio >= least
		t.Measured = fmt.Sprintf("%s %s vs %s %s", a, rate(ra.Throughput), b, rate(rb.Throughput))
		requireClean(&t, ra, rb)
	}
	return t
}

// pipelineTarget is met when idem, on Redis, reaches 0.8 of the request
// rate that redis-benchmark's pipelined claim scripts allow.
func pipelineTarget(cfg Config, results []Result, rb *redisBenchResult) Target {
	t := Target{Name: "Redis unique keys vs redis-benchmark", Goal: "idem ≥ 0.8× redis-benchmark pipelining the same scripts"}
	switch r := find(results, ranOn(cfg, "redis"), "unique", "idem"); {
	case ranOn(cfg, "redis") == "":
		t.Skipped = needsStore("redis")
	case r == nil:
		t.Skipped = needsRuns("unique", "idem")
	case rb == nil || rb.err != nil:
		t.Skipped = "redis-benchmark did not run (-redis-benchmark, single node)"
		if rb != nil {
			t.Skipped += ": " + rb.err.Error()
		}
	default:
		// A request is a claim and a finish script of about the same
		// server cost, so the pipelined ceiling is half the claim rate.
		ceiling := rb.claimsPerSec / 2
		t.Ratio = r.Throughput / ceiling
		t.Met = t.Ratio >= 0.8
		t.Measured = fmt.Sprintf("idem %s requests/s vs redis-benchmark %s claims/s pipelined (ceiling %s requests/s)",
			si(r.Throughput), si(rb.claimsPerSec), si(ceiling))
		requireClean(&t, r)
	}
	return t
}
