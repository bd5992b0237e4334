package main

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// writeHTML renders r as dir/report.html: one self-contained page (inline
// CSS and SVG charts, no scripts, no external references) that a browser
// shows offline.
func writeHTML(dir string, r *Report) error {
	if r == nil {
		r = &Report{}
	}
	var buf bytes.Buffer
	if err := reportTemplate.Execute(&buf, buildPage(r)); err != nil {
		return fmt.Errorf("render report.html: %w", err)
	}
	return os.WriteFile(filepath.Join(dir, "report.html"), buf.Bytes(), 0o644)
}

//go:embed report.html.tmpl
var templateFiles embed.FS

// reportTemplate draws a page. Its one function, n, formats an SVG
// coordinate.
var reportTemplate = template.Must(template.New("report.html.tmpl").Funcs(template.FuncMap{
	"n": n,
}).ParseFS(templateFiles, "report.html.tmpl"))

// palette colours the systems, the same colour for a system everywhere on
// the page. Red and green are left out: they mean failed and met.
var palette = []string{
	"#2f6fdb", // blue
	"#e8871e", // orange
	"#8e5cc8", // purple
	"#1b9e9a", // teal
	"#d6457a", // pink
	"#8c6d3f", // brown
	"#c9a227", // gold
	"#6b7280", // grey
}

// The page's model: everything is formatted here, so the template only
// places strings (which html/template escapes) and coordinates (which n
// formats, never as NaN or Inf). A scenario's section is built in
// html_scenario.go, its charts in charts.go.

type page struct {
	Started  string
	Duration string
	OK       bool
	Summary  string
	Machine  []keyValue
	Config   []keyValue

	Twice []twiceRow

	Targets                    []targetRow
	Met, NotMet, TargetSkipped int

	Scenarios []scenarioView

	Sizes      []sizesRow
	SizesRedis bool

	PaletteCSS template.CSS
}

type keyValue struct{ K, V string }

type twiceRow struct {
	Scenario, System string
	Colour           int
	Count            string
	Keys             []string
	More             string // "and 12 more", when not every key is listed
}

type targetRow struct {
	Name, Goal, Measured, Ratio string
	Status, Class, Reason       string
}

type sizesRow struct {
	System           string
	Colour           int
	InFlight, Record string
	RedisRecord      string
}

func buildPage(r *Report) page {
	colours := systemColours(r)
	p := page{
		Started:    startedText(r.Started),
		Duration:   tookText(r.Duration),
		OK:         r.OK,
		Machine:    machineRows(r.Machine),
		Config:     configRows(r.Config),
		Twice:      twiceRows(r.Results, colours),
		PaletteCSS: paletteCSS(),
	}
	p.addTargets(r.Targets)
	p.Summary = p.summary(r)
	for _, name := range scenarioOrder(r) {
		p.Scenarios = append(p.Scenarios, buildScenario(name, r.Results, colours, len(p.Scenarios)))
	}
	p.addSizes(r.Sizes, colours)
	return p
}

func startedText(t time.Time) string {
	if t.IsZero() {
		return noValue
	}
	return t.Format("2006-01-02 15:04:05 MST")
}

// tookText formats the run's wall time, which the report holds as a Go
// duration string ("14.2s"), as the page's other durations are.
func tookText(s string) string {
	if d, err := time.ParseDuration(s); err == nil {
		return duration(d)
	}
	return orNoValue(s)
}

// paletteCSS defines the classes c0, c1, … that colour a system's swatch.
func paletteCSS() template.CSS {
	var css strings.Builder
	for i, c := range palette {
		fmt.Fprintf(&css, ".c%d{background:%s}", i, c)
	}
	return template.CSS(css.String())
}

func machineRows(m Machine) []keyValue {
	rows := []keyValue{
		{"Go", orNoValue(m.GoVersion)},
		{"OS / arch", orNoValue(strings.Trim(m.OS+"/"+m.Arch, "/"))},
		{"CPUs", count(int64(m.CPUs))},
		{"GOMAXPROCS", count(int64(m.GOMAXPROCS))},
		{"CPU model", orNoValue(m.CPUModel)},
	}
	if m.Redis != "" {
		rows = append(rows, keyValue{"Redis", m.Redis})
	}
	return rows
}

// configRows lists the flags of the run; those that do not apply to it
// (Redis addresses on the memory store, an unset -out) are left out.
func configRows(c Config) []keyValue {
	rows := []keyValue{{"store", orNoValue(c.Store)}}
	if len(c.RedisAddrs) > 0 {
		rows = append(rows, keyValue{"Redis addresses", strings.Join(c.RedisAddrs, ", ")})
	}
	rows = append(rows,
		keyValue{"duration per run", duration(c.Duration)},
		keyValue{"concurrency", count(int64(c.Concurrency))},
		keyValue{"keys", count(int64(c.Keys))},
		keyValue{"storm size", count(int64(c.StormSize))},
		keyValue{"xstorm size", count(int64(c.XStormSize)) + " over " + plural(c.Instances, "instance", "instances")},
		keyValue{"dup ratio", decimal(c.DupRatio)},
		keyValue{"distribution", orNoValue(c.Dist)},
		keyValue{"settle", duration(c.Settle)},
		keyValue{"work", duration(c.Work)},
		keyValue{"storm work", duration(c.StormWork)},
		keyValue{"slow work", duration(c.SlowWork)},
		keyValue{"poll interval", duration(c.PollInterval)},
		keyValue{"scenarios", orNoValue(strings.Join(c.Scenarios, ", "))},
		keyValue{"systems", orNoValue(strings.Join(c.Systems, ", "))},
	)
	if slices.ContainsFunc(c.Scenarios, isTxScenario) {
		rows = append(rows, keyValue{"tx rounds", count(int64(c.TxRounds)) + ", after a warm-up round"})
	}
	if c.Store != "" && c.Store != "memory" {
		rows = append(rows, keyValue{"redis-benchmark", strconv.FormatBool(c.RedisBench)})
	}
	for _, kv := range []keyValue{{"out", c.Out}, {"cpuprofile", c.CPUProfile}} {
		if kv.V != "" {
			rows = append(rows, kv)
		}
	}
	return rows
}

// twiceRows lists, per result that ran a key more than once, how many and
// which keys.
func twiceRows(results []Result, colours map[string]int) []twiceRow {
	var rows []twiceRow
	for _, res := range results {
		k := res.ranTwice()
		if k == 0 {
			continue
		}
		row := twiceRow{
			Scenario: res.Scenario,
			System:   res.System,
			Colour:   colours[res.System],
			Count:    count(k),
			Keys:     res.RanTwice,
		}
		if more := k - int64(len(res.RanTwice)); more > 0 && len(res.RanTwice) > 0 {
			row.More = "and " + count(more) + " more"
		}
		rows = append(rows, row)
	}
	return rows
}

// addTargets adds a row per target and counts them by status.
func (p *page) addTargets(ts []Target) {
	for _, t := range ts {
		row := targetRow{Name: t.Name, Goal: orNoValue(t.Goal), Measured: orNoValue(t.Measured)}
		if t.Ratio != 0 && finite(t.Ratio) {
			row.Ratio = ratio(t.Ratio)
		}
		switch {
		case t.Skipped != "":
			row.Status, row.Class, row.Reason = "skipped", "skip", t.Skipped
			p.TargetSkipped++
		case t.Met:
			row.Status, row.Class = "met", "met"
			p.Met++
		default:
			row.Status, row.Class = "not met", "notmet"
			p.NotMet++
		}
		p.Targets = append(p.Targets, row)
	}
}

// summary is the banner's text: the verdict's reason first, then what ran
// twice and the targets' tally. It needs p.Twice and the targets counted.
func (p *page) summary(r *Report) string {
	var parts []string
	if len(p.Twice) > 0 {
		parts = append(parts, plural(len(p.Twice), "system run", "system runs")+" executed a key more than once")
	}
	if len(r.Targets) > 0 {
		parts = append(parts, fmt.Sprintf("targets: %d met, %d not met, %d skipped", p.Met, p.NotMet, p.TargetSkipped))
	}
	switch {
	case len(r.Results) == 0:
		parts = append([]string{"no results"}, parts...)
	case r.OK:
		parts = append([]string{"every key ran at most once and every call got its own key's result"}, parts...)
	case len(p.Twice) == 0:
		parts = append([]string{"a call got another key's result"}, parts...)
	}
	return strings.Join(parts, " · ")
}

func (p *page) addSizes(ss []Sizes, colours map[string]int) {
	for _, s := range ss {
		p.Sizes = append(p.Sizes, sizesRow{
			System:      s.System,
			Colour:      colours[s.System],
			InFlight:    heapSize(s.BytesPerInFlightKey, s.InFlightUnsound),
			Record:      heapSize(s.BytesPerRecord, s.RecordUnsound),
			RedisRecord: bytesPer(s.RedisBytesPerRecord),
		})
		if s.RedisBytesPerRecord != 0 {
			p.SizesRedis = true
		}
	}
}

// systemColours gives each system an index into palette: the configured
// systems first, in order, then any other in order of appearance.
func systemColours(r *Report) map[string]int {
	idx := map[string]int{}
	add := func(s string) {
		if _, ok := idx[s]; !ok {
			idx[s] = len(idx) % len(palette)
		}
	}
	for _, s := range r.Config.Systems {
		add(s)
	}
	for _, res := range r.Results {
		add(res.System)
	}
	for _, s := range r.Sizes {
		add(s.System)
	}
	return idx
}

// clip shortens s to at most limit runes.
func clip(s string, limit int) string {
	if r := []rune(s); len(r) > limit {
		return string(r[:limit-1]) + "…"
	}
	return s
}
