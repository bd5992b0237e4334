package main

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// printScenario writes the table of one scenario's results.
func printScenario(w io.Writer, scenario string, results []Result) {
	fmt.Fprintf(w, "\n%s\n", scenarioTitle(scenario))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	cpu, rows := hasRedisCPU(results, scenario), hasRows(results, scenario)
	head := "system\tthroughput\tp50\tp99\tp999\tsettle p50\tsettle p99\tsettle max\texecutions/keys\terrors\tstore trips\tops/trip\tallocs/op\t"
	if rows {
		head += "rows/keys\t"
	}
	if cpu {
		head += "redis CPU/call\tcmdstats/call\tscript calls\tµs/script\tµs/cmd\t"
	}
	fmt.Fprintln(tw, head+"vs baselines\t")
	multi := multiStore(results, scenario)
	for _, r := range results {
		if r.Scenario != scenario {
			continue
		}
		name := r.System
		if multi {
			name = r.label()
		}
		execs := count(r.Executions) + "/" + count(r.KeysCompleted)
		if k := r.ranTwice(); k > 0 {
			execs += " (" + count(k) + " ran twice!)"
		}
		errs := count(r.Errors)
		if r.WrongResults > 0 {
			errs += " +" + count(r.WrongResults) + " WRONG"
		}
		opsPerTrip := noValue
		if r.StoreRoundTrips > 0 {
			opsPerTrip = decimal(float64(r.StoreOps) / float64(r.StoreRoundTrips))
		}
		cells := []string{
			name, rate(r.Throughput),
			micros(r.Latency.P50), micros(r.Latency.P99), micros(r.Latency.P999),
			settleMicros(r.Settle, r.Settle.P50), settleMicros(r.Settle, r.Settle.P99), settleMicros(r.Settle, r.Settle.Max),
			execs, errs, count(r.StoreRoundTrips), opsPerTrip, decimal(r.AllocsPerOp),
		}
		if rows {
			cells = append(cells, rowsCell(r.Rows))
		}
		if cpu {
			cells = append(cells, redisCPUCells(r.RedisCPU)...)
		}
		cells = append(cells, ratios(r.Ratios))
		fmt.Fprintln(tw, strings.Join(cells, "\t")+"\t")
	}
	tw.Flush()
}

// hasRedisCPU reports whether some result of scenario measured the Redis
// server's CPU.
func hasRedisCPU(results []Result, scenario string) bool {
	for _, r := range results {
		if r.Scenario == scenario && r.RedisCPU != nil {
			return true
		}
	}
	return false
}

// hasRows reports whether some result of scenario counted its rows.
func hasRows(results []Result, scenario string) bool {
	for _, r := range results {
		if r.Scenario == scenario && r.Rows != nil {
			return true
		}
	}
	return false
}

// rowsCell prints a row check: "5,120/5,120", and what failed.
func rowsCell(c *RowCheck) string {
	if c == nil {
		return noValue
	}
	s := count(c.Rows) + "/" + count(c.Keys)
	if c.Twice > 0 {
		s += " (" + plural(int(c.Twice), "key with more than one row!", "keys with more than one row!") + ")"
	}
	if c.Missing > 0 {
		s += " (" + plural(int(c.Missing), "key without a row!", "keys without a row!") + ")"
	}
	if c.Stray > 0 {
		s += " (" + plural(int(c.Stray), "stray row!", "stray rows!") + ")"
	}
	return s
}

// printRoundRatios writes, under a scenario whose systems alternated in
// rounds, the ratios of each round: "pgtx per round: 0.61× 0.58× 0.66×
// idem". Nothing for another scenario.
func printRoundRatios(w io.Writer, scenario string, results []Result) {
	for _, r := range results {
		if r.Scenario != scenario || len(r.RoundRatios) == 0 {
			continue
		}
		var parts []string
		for _, k := range sortedKeys(r.RoundRatios) {
			var rs []string
			for _, v := range r.RoundRatios[k] {
				rs = append(rs, ratio(v))
			}
			parts = append(parts, strings.Join(rs, " ")+" "+k)
		}
		fmt.Fprintf(w, "  %s per round: %s\n", r.System, strings.Join(parts, "; "))
	}
}

// redisCPUCells are the Redis CPU columns of a row: server CPU and
// commandstats µs per call, script calls, and µs per script call and per
// other command.
func redisCPUCells(c *RedisCPU) []string {
	if c == nil {
		return []string{noValue, noValue, noValue, noValue, noValue}
	}
	perScript, perCmd := noValue, noValue
	if c.ScriptCalls > 0 {
		perScript = micros(c.PerScriptCallUS)
	}
	if c.CommandCalls > 0 {
		perCmd = micros(c.PerCommandUS)
	}
	return []string{micros(c.PerRequestUS), micros(c.StatsPerRequestUS), count(c.ScriptCalls), perScript, perCmd}
}

// ratios lists a result's throughput ratios to the baselines: "1.63× mutex-map, 2.26× poll".
func ratios(m map[string]float64) string {
	parts := make([]string, 0, len(m))
	for _, k := range sortedKeys(m) {
		parts = append(parts, ratio(m[k])+" "+k)
	}
	return strings.Join(parts, ", ")
}

func scenarioTitle(s string) string {
	switch s {
	case "unique":
		return "unique — every call a new key (executions)"
	case "storm":
		return "storm — many concurrent callers per key; one runs, the rest wait"
	case "replay":
		return "replay — calls for keys already completed"
	case "zipf":
		return "zipf — a skewed mix of new, in-flight and completed keys"
	case "slow":
		return "slow — a slow function; duplicates must wait"
	case "xstorm":
		return "xstorm — a storm spread over instances sharing the store; settle is from the owner's completion, every duplicate (the target: those on other instances)"
	case "tx-unique", "tx-dup":
		keys := "every call a new key"
		if s == "tx-dup" {
			keys = "a -dup share of the calls repeat a recent key"
		}
		return s + " — " + keys + "; each run writes a charges row: idem (its fn inserts in autocommit), " +
			"pgtx (in the transaction that completes the key), by-hand (INSERT ... ON CONFLICT DO NOTHING on a keys table, then the row, one transaction; " +
			"no replay); alternating rounds, rows/keys counted after"
	}
	return s
}

// printSkipped writes why scenario ran on none of stores.
func printSkipped(w io.Writer, scenario string, stores []string) {
	why := "no selected system runs it"
	for _, st := range stores {
		if n := xstormSkipped(st); scenario == "xstorm" && n != "" {
			why = n
		}
	}
	if isTxScenario(scenario) && !slices.Contains(stores, "postgres") {
		why = "skipped: the transactional path runs on PostgreSQL only; run with -postgres DSN"
	}
	fmt.Fprintf(w, "\n%s\n  %s\n", scenarioTitle(scenario), why)
}

func printTargets(w io.Writer, ts []Target) {
	fmt.Fprintln(w, "\ntargets")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	for _, t := range ts {
		status := "not met"
		switch {
		case t.Skipped != "":
			status = "skipped"
		case t.Met:
			status = "met"
		}
		detail := t.Measured
		if t.Skipped != "" {
			detail = t.Skipped
		}
		r := ""
		if t.Ratio != 0 && finite(t.Ratio) {
			r = ratio(t.Ratio)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", status, t.Name, r, t.Goal, detail)
	}
	tw.Flush()
}

func printSizes(w io.Writer, ss []Sizes) {
	for _, s := range ss {
		how := "Go heap: runtime, cache and store"
		if s.Rounds > 0 {
			how += "; median of " + plural(s.Rounds, "round", "rounds")
		}
		if d := s.InFlightDropped + s.RecordDropped; d > 0 {
			how += ", " + plural(d, "round run again: the heap shrank during it", "rounds run again: the heap shrank during them")
		}
		fmt.Fprintf(w, "\nmemory (%s): %s per key in flight, %s per stored record (%s)",
			s.System, heapSize(s.BytesPerInFlightKey, s.InFlightUnsound), heapSize(s.BytesPerRecord, s.RecordUnsound), how)
		if s.RedisBytesPerRecord > 0 {
			fmt.Fprintf(w, ", %s per record in Redis (MEMORY USAGE)", bytesPer(s.RedisBytesPerRecord))
		}
		if s.PostgresBytesPerRecord > 0 {
			fmt.Fprintf(w, ", %s per row in PostgreSQL (table and indexes)", bytesPer(s.PostgresBytesPerRecord))
		}
		fmt.Fprintln(w)
	}
}

// heapSize prints a Go heap figure of Sizes, or says why there is none.
func heapSize(v float64, unsound string) string {
	if unsound != "" {
		return "not measured (" + unsound + ")"
	}
	if !(v > 0) {
		return noValue
	}
	return bytesPer(v)
}
