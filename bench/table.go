package main

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
)

// dur formats microseconds readably.
func fmtUS(us float64) string {
	switch {
	case us == 0:
		return "-"
	case us < 1:
		return fmt.Sprintf("%.0fns", us*1e3)
	case us < 1000:
		return fmt.Sprintf("%.1fµs", us)
	case us < 1e6:
		return fmt.Sprintf("%.2fms", us/1e3)
	}
	return fmt.Sprintf("%.2fs", us/1e6)
}

func rate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2fM/s", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.1fk/s", v/1e3)
	}
	return fmt.Sprintf("%.0f/s", v)
}

// printScenario writes the table of one scenario's results.
func printScenario(w io.Writer, scenario string, results []Result) {
	fmt.Fprintf(w, "\n%s\n", scenarioTitle(scenario))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "system\tthroughput\tp50\tp99\tp999\tsettle p50\tsettle p99\texecutions/keys\terrors\tstore trips\tops/trip\tallocs/op\tvs baselines\t")
	for _, r := range results {
		if r.Scenario != scenario {
			continue
		}
		execs := fmt.Sprintf("%d/%d", r.Executions, r.KeysCompleted)
		if r.RanTwiceCount > 0 {
			execs += fmt.Sprintf(" (%d ran twice!)", r.RanTwiceCount)
		}
		trips, per := "-", "-"
		if r.StoreRoundTrips > 0 {
			trips = fmt.Sprint(r.StoreRoundTrips)
			per = fmt.Sprintf("%.1f", float64(r.StoreOps)/float64(r.StoreRoundTrips))
		}
		errs := fmt.Sprint(r.Errors)
		if r.WrongResults > 0 {
			errs += fmt.Sprintf(" +%d WRONG", r.WrongResults)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.1f\t%s\t\n",
			r.System, rate(r.Throughput), fmtUS(r.Latency.P50), fmtUS(r.Latency.P99), fmtUS(r.Latency.P999),
			fmtUS(r.Settle.P50), fmtUS(r.Settle.P99), execs, errs, trips, per, r.AllocsPerOp, ratios(r.Ratios))
	}
	tw.Flush()
}

func ratios(m map[string]float64) string {
	if len(m) == 0 {
		return ""
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%.2fx %s", m[k], k)
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
	}
	return s
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
		if t.Ratio != 0 {
			r = fmt.Sprintf("%.2fx", t.Ratio)
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", status, t.Name, r, t.Goal, detail)
	}
	tw.Flush()
}

func printSizes(w io.Writer, ss []Sizes) {
	for _, s := range ss {
		fmt.Fprintf(w, "\nmemory (%s): %.0f B per key in flight, %.0f B per stored record (Go heap: runtime, cache and store)",
			s.System, s.BytesPerInFlightKey, s.BytesPerRecord)
		if s.RedisBytesPerRecord > 0 {
			fmt.Fprintf(w, ", %.0f B per record in Redis (MEMORY USAGE)", s.RedisBytesPerRecord)
		}
		fmt.Fprintln(w)
	}
}
