package main

import (
	"fmt"
	"strings"
)

// A scenario's section of the page: a table row per system, the systems'
// first errors, and the two charts.

type scenarioView struct {
	Name      string
	ID        string
	HasSettle bool
	HasRatios bool
	Rows      []systemRow
	Notes     []note // first errors
	Bars      barChart
	Lat       latencyChart
}

type note struct {
	System string
	Colour int
	Text   string
}

type systemRow struct {
	System, Store     string
	Colour            int
	Calls, Errors     string
	ErrorsBad         bool
	Wrong             string // "3 wrong results", when any
	Throughput        string
	P50, P99, P999    string
	SettleP50         string
	SettleP99         string
	SettleMax         string
	Executions, Keys  string
	ExecBad           bool
	RanTwice          string
	RoundTrips        string
	RoundTripsPerCall string
	StoreOps          string
	RedisCPU          string // "12 µs Redis CPU/call (commandstats 9 µs)", on Redis
	Allocs, Bytes     string
	Ratios            []string
	RoundRatios       []string // "per round vs idem: 0.61× 0.58×", when the systems alternated
	Outcomes          []string
	Rows              string // "rows/keys 5,120 / 5,120", in the tx scenarios
	RowsBad           bool
	ShowSettle        bool // the scenario has settle columns
	ShowRatios        bool // the scenario has a ratio column
}

// scenarioOrder lists the scenarios that have results, in the order they
// first appear.
func scenarioOrder(r *Report) []string {
	var out []string
	seen := map[string]bool{}
	for _, res := range r.Results {
		if !seen[res.Scenario] {
			seen[res.Scenario] = true
			out = append(out, res.Scenario)
		}
	}
	return out
}

// buildScenario builds the section of scenario name, the n-th on the page
// (from 0), from those of all the results that belong to it.
func buildScenario(name string, all []Result, colours map[string]int, n int) scenarioView {
	sv := scenarioView{Name: orNoValue(name), ID: fmt.Sprintf("scenario-%d", n+1)}
	var results []Result
	for _, res := range all {
		if res.Scenario == name {
			results = append(results, res)
		}
	}
	if multiStore(results, name) {
		// Name each row, bar and line by system and store; a system keeps
		// its colour on every store.
		for i := range results {
			base := results[i].System
			results[i].System = results[i].label()
			colours[results[i].System] = colours[base]
		}
	}
	for _, res := range results {
		if res.Settle.Count > 0 {
			sv.HasSettle = true
		}
		if len(res.Ratios) > 0 {
			sv.HasRatios = true
		}
	}
	for _, res := range results {
		row := buildSystemRow(res, colours)
		row.ShowSettle, row.ShowRatios = sv.HasSettle, sv.HasRatios
		sv.Rows = append(sv.Rows, row)
		if res.FirstError != "" {
			sv.Notes = append(sv.Notes, note{System: res.System, Colour: colours[res.System], Text: clip(res.FirstError, 300)})
		}
	}
	sv.Bars = buildBars(results, colours)
	sv.Lat = buildLatency(results, colours)
	return sv
}

// buildSystemRow formats one result as a row of its scenario's table.
func buildSystemRow(res Result, colours map[string]int) systemRow {
	row := systemRow{
		System:     orNoValue(res.System),
		Store:      res.Store,
		Colour:     colours[res.System],
		Calls:      count(res.Calls),
		Errors:     count(res.Errors),
		ErrorsBad:  res.Errors > 0 || res.WrongResults > 0,
		Throughput: rate(res.Throughput),
		P50:        micros(res.Latency.P50),
		P99:        micros(res.Latency.P99),
		P999:       micros(res.Latency.P999),
		SettleP50:  settleMicros(res.Settle, res.Settle.P50),
		SettleP99:  settleMicros(res.Settle, res.Settle.P99),
		SettleMax:  settleMicros(res.Settle, res.Settle.Max),
		Executions: count(res.Executions),
		Keys:       count(res.KeysCompleted),
		ExecBad:    res.Executions != res.KeysCompleted || res.ranTwice() > 0,
		RoundTrips: count(res.StoreRoundTrips),
		Allocs:     decimal(res.AllocsPerOp),
		Bytes:      bytesPer(res.BytesPerOp),
	}
	if res.Calls > 0 && res.StoreRoundTrips > 0 {
		row.RoundTripsPerCall = decimal(float64(res.StoreRoundTrips)/float64(res.Calls)) + "/call"
	}
	if res.StoreOps != 0 {
		row.StoreOps = count(res.StoreOps)
	}
	if c := res.RedisCPU; c != nil {
		row.RedisCPU = micros(c.PerRequestUS) + " Redis CPU/call (commandstats " + micros(c.StatsPerRequestUS) + ")"
	}
	if res.WrongResults > 0 {
		row.Wrong = count(res.WrongResults) + " wrong results"
	}
	if k := res.ranTwice(); k > 0 {
		row.RanTwice = count(k) + " ran twice"
		if res.Unsafe {
			row.RanTwice += " (unsafe baseline)"
		}
	}
	for _, k := range sortedKeys(res.Ratios) {
		row.Ratios = append(row.Ratios, ratio(res.Ratios[k])+" "+k)
	}
	for _, k := range sortedKeys(res.RoundRatios) {
		var rs []string
		for _, v := range res.RoundRatios[k] {
			rs = append(rs, ratio(v))
		}
		row.RoundRatios = append(row.RoundRatios, "per round vs "+k+": "+strings.Join(rs, " "))
	}
	if c := res.Rows; c != nil {
		row.Rows, row.RowsBad = "rows/keys "+rowsCell(c), !c.OK
	}
	for _, k := range sortedKeys(res.Outcomes) {
		row.Outcomes = append(row.Outcomes, k+" "+count(res.Outcomes[k]))
	}
	return row
}
