package main

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"os"
	"path/filepath"
	"sort"
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
// formats, never as NaN or Inf).

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
	Executions, Keys  string
	ExecBad           bool
	RanTwice          string
	RoundTrips        string
	RoundTripsPerCall string
	StoreOps          string
	Allocs, Bytes     string
	Ratios            []string
	Outcomes          []string
	ShowSettle        bool // the scenario has settle columns
	ShowRatios        bool // the scenario has a ratio column
}

type sizesRow struct {
	System           string
	Colour           int
	InFlight, Record string
	RedisRecord      string
}

func buildPage(r *Report) page {
	p := page{
		Started:  "—",
		Duration: orDash(r.Duration),
		OK:       r.OK,
	}
	if !r.Started.IsZero() {
		p.Started = r.Started.Format("2006-01-02 15:04:05 MST")
	}

	colours := systemColours(r)
	var css strings.Builder
	for i, c := range palette {
		fmt.Fprintf(&css, ".c%d{background:%s}", i, c)
	}
	p.PaletteCSS = template.CSS(css.String())

	m := r.Machine
	p.Machine = append(p.Machine,
		keyValue{"Go", orDash(m.GoVersion)},
		keyValue{"OS / arch", orDash(strings.Trim(m.OS+"/"+m.Arch, "/"))},
		keyValue{"CPUs", count(int64(m.CPUs))},
		keyValue{"GOMAXPROCS", count(int64(m.GOMAXPROCS))},
		keyValue{"CPU model", orDash(m.CPUModel)},
	)
	if m.Redis != "" {
		p.Machine = append(p.Machine, keyValue{"Redis", m.Redis})
	}

	c := r.Config
	p.Config = []keyValue{
		{"store", orDash(c.Store)},
	}
	if len(c.RedisAddrs) > 0 {
		p.Config = append(p.Config, keyValue{"Redis addresses", strings.Join(c.RedisAddrs, ", ")})
	}
	p.Config = append(p.Config,
		keyValue{"duration per run", dur(c.Duration)},
		keyValue{"concurrency", count(int64(c.Concurrency))},
		keyValue{"keys", count(int64(c.Keys))},
		keyValue{"storm size", count(int64(c.StormSize))},
		keyValue{"dup ratio", plain(c.DupRatio)},
		keyValue{"distribution", orDash(c.Dist)},
		keyValue{"settle", dur(c.Settle)},
		keyValue{"work", dur(c.Work)},
		keyValue{"storm work", dur(c.StormWork)},
		keyValue{"slow work", dur(c.SlowWork)},
		keyValue{"poll interval", dur(c.PollInterval)},
		keyValue{"scenarios", orDash(strings.Join(c.Scenarios, ", "))},
		keyValue{"systems", orDash(strings.Join(c.Systems, ", "))},
	)
	if c.Store != "" && c.Store != "memory" {
		p.Config = append(p.Config, keyValue{"redis-benchmark", strconv.FormatBool(c.RedisBench)})
	}
	for _, kv := range []keyValue{{"out", c.Out}, {"cpuprofile", c.CPUProfile}} {
		if kv.V != "" {
			p.Config = append(p.Config, kv)
		}
	}

	var twiceResults int
	for _, res := range r.Results {
		if res.RanTwiceCount == 0 && len(res.RanTwice) == 0 {
			continue
		}
		twiceResults++
		n := max(res.RanTwiceCount, int64(len(res.RanTwice)))
		row := twiceRow{
			Scenario: res.Scenario,
			System:   res.System,
			Colour:   colours[res.System],
			Count:    count(n),
			Keys:     res.RanTwice,
		}
		if more := n - int64(len(res.RanTwice)); more > 0 && len(res.RanTwice) > 0 {
			row.More = "and " + count(more) + " more"
		}
		p.Twice = append(p.Twice, row)
	}

	for _, t := range r.Targets {
		row := targetRow{Name: t.Name, Goal: orDash(t.Goal), Measured: orDash(t.Measured)}
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

	var parts []string
	if twiceResults > 0 {
		parts = append(parts, plural(twiceResults, "system run", "system runs")+" executed a key more than once")
	}
	if len(r.Targets) > 0 {
		parts = append(parts, fmt.Sprintf("targets: %d met, %d not met, %d skipped", p.Met, p.NotMet, p.TargetSkipped))
	}
	switch {
	case len(r.Results) == 0:
		parts = append([]string{"no results"}, parts...)
	case r.OK:
		parts = append([]string{"every key ran at most once and every target check ran"}, parts...)
	case twiceResults == 0:
		parts = append([]string{"a target check failed to run"}, parts...)
	}
	p.Summary = strings.Join(parts, " · ")

	for _, name := range scenarioOrder(r) {
		p.Scenarios = append(p.Scenarios, buildScenario(name, r.Results, colours, len(p.Scenarios)))
	}

	for _, s := range r.Sizes {
		p.Sizes = append(p.Sizes, sizesRow{
			System:      s.System,
			Colour:      colours[s.System],
			InFlight:    bytesPer(s.BytesPerInFlightKey),
			Record:      bytesPer(s.BytesPerRecord),
			RedisRecord: bytesPer(s.RedisBytesPerRecord),
		})
		if s.RedisBytesPerRecord != 0 {
			p.SizesRedis = true
		}
	}
	return p
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

func buildScenario(name string, all []Result, colours map[string]int, n int) scenarioView {
	sv := scenarioView{Name: orDash(name), ID: fmt.Sprintf("scenario-%d", n+1)}
	var results []Result
	for _, res := range all {
		if res.Scenario == name {
			results = append(results, res)
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
		row := systemRow{
			System:     orDash(res.System),
			Store:      res.Store,
			Colour:     colours[res.System],
			Calls:      count(res.Calls),
			Errors:     count(res.Errors),
			ErrorsBad:  res.Errors > 0 || res.WrongResults > 0,
			Throughput: si(res.Throughput) + "/s",
			P50:        micros(res.Latency.P50),
			P99:        micros(res.Latency.P99),
			P999:       micros(res.Latency.P999),
			SettleP50:  "—",
			SettleP99:  "—",
			Executions: count(res.Executions),
			Keys:       count(res.KeysCompleted),
			ExecBad:    res.Executions != res.KeysCompleted || res.RanTwiceCount > 0 || len(res.RanTwice) > 0,
			RoundTrips: count(res.StoreRoundTrips),
			Allocs:     fixed(res.AllocsPerOp, 1),
			Bytes:      bytesPer(res.BytesPerOp),
			ShowSettle: sv.HasSettle,
			ShowRatios: sv.HasRatios,
		}
		if res.Calls > 0 && res.StoreRoundTrips > 0 {
			row.RoundTripsPerCall = fixed(float64(res.StoreRoundTrips)/float64(res.Calls), 3) + "/call"
		}
		if res.StoreOps != 0 {
			row.StoreOps = si(float64(res.StoreOps))
		}
		if res.WrongResults > 0 {
			row.Wrong = count(res.WrongResults) + " wrong results"
		}
		if res.FirstError != "" {
			sv.Notes = append(sv.Notes, note{System: res.System, Colour: colours[res.System], Text: clip(res.FirstError, 300)})
		}
		if res.Settle.Count > 0 {
			row.SettleP50 = micros(res.Settle.P50)
			row.SettleP99 = micros(res.Settle.P99)
		}
		if n := max(res.RanTwiceCount, int64(len(res.RanTwice))); n > 0 {
			row.RanTwice = count(n) + " ran twice"
		}
		for _, k := range sortedKeys(res.Ratios) {
			row.Ratios = append(row.Ratios, ratio(res.Ratios[k])+" "+k)
		}
		for _, k := range sortedKeys(res.Outcomes) {
			row.Outcomes = append(row.Outcomes, k+" "+count(res.Outcomes[k]))
		}
		sv.Rows = append(sv.Rows, row)
	}
	sv.Bars = buildBars(results, colours)
	sv.Lat = buildLatency(results, colours)
	return sv
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Charts. Sizes are in SVG user units; the SVG scales to its box.

type tick struct {
	Pos   float64
	Label string
	Major bool
}

type barChart struct {
	W, H        float64
	Left, Right float64 // plot area, x
	Top, Bottom float64 // plot area, y
	Grid        []tick
	Bars        []bar
	Empty       bool
	AxisLabelX  float64
	AxisLabelY  float64
}

type bar struct {
	Name, Value string
	Colour      string
	Bad         bool
	Y, H, W     float64
	TextY       float64
	ValueX      float64
}

const (
	chartW   = 520.0
	barRow   = 34.0
	barThick = 22.0
)

func buildBars(results []Result, colours map[string]int) barChart {
	c := barChart{W: chartW, Left: 130, Right: chartW - 70, Top: 10}
	hi := 0.0
	for _, res := range results {
		if finite(res.Throughput) && res.Throughput > hi {
			hi = res.Throughput
		}
	}
	c.Bottom = c.Top + barRow*float64(max(len(results), 1))
	c.H = c.Bottom + 38
	c.AxisLabelX = (c.Left + c.Right) / 2
	c.AxisLabelY = c.H - 4
	if hi <= 0 {
		c.Empty = true
		hi = 1
	}
	step, top := niceScale(hi, 5)
	for v := 0.0; v <= top*(1+1e-9); v += step {
		c.Grid = append(c.Grid, tick{Pos: c.Left + v/top*(c.Right-c.Left), Label: si(v)})
	}
	for i, res := range results {
		v := res.Throughput
		if !finite(v) || v < 0 {
			v = 0
		}
		w := v / top * (c.Right - c.Left)
		y := c.Top + barRow*float64(i) + (barRow-barThick)/2
		c.Bars = append(c.Bars, bar{
			Name:   res.System,
			Value:  si(res.Throughput) + "/s",
			Colour: palette[colours[res.System]],
			Bad:    res.RanTwiceCount > 0 || len(res.RanTwice) > 0,
			Y:      y,
			H:      barThick,
			W:      w,
			TextY:  y + barThick/2 + 4,
			ValueX: c.Left + w + 6,
		})
	}
	return c
}

type latencyChart struct {
	W, H        float64
	Left, Right float64
	Top, Bottom float64
	XTicks      []tick
	YTicks      []tick
	Series      []series
	Legend      []legendItem
	Empty       bool
	MidX, MidY  float64
	XLabelY     float64
}

type series struct {
	Name, Colour string
	Line, Area   string // SVG path data
}

type legendItem struct {
	Name, Colour string
	X, Y, RectY  float64
}

// bin is one histogram bucket as a share of all calls: values in [Lo, Hi) µs.
type bin struct{ Lo, Hi, Share float64 }

// bins turns a Latency histogram into plottable buckets: positive finite
// bounds only, leading and trailing empty buckets dropped.
func bins(l Latency) []bin {
	n := min(len(l.UpperUS), len(l.Counts))
	var total float64
	for i := 0; i < n; i++ {
		if l.Counts[i] > 0 {
			total += float64(l.Counts[i])
		}
	}
	if total == 0 {
		return nil
	}
	var out []bin
	for i := 0; i < n; i++ {
		hi := l.UpperUS[i]
		if !finite(hi) || hi <= 0 {
			continue
		}
		lo := 0.0
		if i > 0 {
			lo = l.UpperUS[i-1]
		} else if n > 1 && finite(l.UpperUS[1]) && l.UpperUS[1] > hi {
			lo = hi * hi / l.UpperUS[1] // one ratio below, as the buckets are log-spaced
		}
		if !finite(lo) || lo <= 0 || lo >= hi {
			lo = hi / 2
		}
		if hi > 1e12 { // an overflow bucket with a huge bound
			hi = lo * 2
		}
		share := 0.0
		if l.Counts[i] > 0 {
			share = float64(l.Counts[i]) / total
		}
		out = append(out, bin{lo, hi, share})
	}
	first, last := -1, -1
	for i, b := range out {
		if b.Share > 0 {
			if first < 0 {
				first = i
			}
			last = i
		}
	}
	if first < 0 {
		return nil
	}
	return out[first : last+1]
}

func buildLatency(results []Result, colours map[string]int) latencyChart {
	c := latencyChart{W: chartW, Left: 52, Right: chartW - 26}

	// Legend rows along the top, wrapped to the width.
	x, y := c.Left, 16.0
	for _, res := range results {
		w := 30 + 7.2*float64(len([]rune(res.System))) + 18
		if x+w > c.Right && x > c.Left {
			x, y = c.Left, y+18
		}
		c.Legend = append(c.Legend, legendItem{Name: res.System, Colour: palette[colours[res.System]], X: x, Y: y, RectY: y - 6})
		x += w
	}
	c.Top = y + 18
	c.Bottom = c.Top + 220
	c.H = c.Bottom + 48
	c.MidX = (c.Left + c.Right) / 2
	c.MidY = (c.Top + c.Bottom) / 2
	c.XLabelY = c.H - 6

	type sys struct {
		name string
		bins []bin
	}
	var all []sys
	lo, hi, top := math.Inf(1), 0.0, 0.0
	for _, res := range results {
		bs := bins(res.Latency)
		if len(bs) == 0 {
			continue
		}
		all = append(all, sys{res.System, bs})
		lo = math.Min(lo, bs[0].Lo)
		hi = math.Max(hi, bs[len(bs)-1].Hi)
		for _, b := range bs {
			top = math.Max(top, b.Share)
		}
	}
	if len(all) == 0 || !(hi > lo) || top <= 0 {
		c.Empty = true
		lo, hi, top = 1, 1000, 1
	}
	// Whole decades on the x axis.
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi <= lo {
		hi = lo * 10
	}
	l0, l1 := math.Log10(lo), math.Log10(hi)
	xs := func(v float64) float64 {
		return c.Left + (math.Log10(v)-l0)/(l1-l0)*(c.Right-c.Left)
	}
	decades := int(math.Round(l1 - l0))
	for d := 0; d <= decades; d++ {
		base := math.Pow(10, l0+float64(d))
		t := tick{Pos: xs(base), Major: true}
		if decades <= 8 || d%2 == 0 {
			t.Label = micros(base) // every other decade when they are crowded
		}
		c.XTicks = append(c.XTicks, t)
		if d == decades {
			break
		}
		for m := 2; m <= 9; m++ {
			t := tick{Pos: xs(base * float64(m))}
			if decades <= 2 && (m == 2 || m == 5) {
				t.Label = micros(base * float64(m))
			}
			c.XTicks = append(c.XTicks, t)
		}
	}

	step, ytop := niceScale(top, 5)
	ys := func(s float64) float64 { return c.Bottom - s/ytop*(c.Bottom-c.Top) }
	for v := 0.0; v <= ytop*(1+1e-9); v += step {
		c.YTicks = append(c.YTicks, tick{Pos: ys(v), Label: percent(v, step)})
	}

	// Drawn last to first, so that the first system (idem, as configured)
	// is on top where lines coincide.
	for i := len(all) - 1; i >= 0; i-- {
		s := all[i]
		var d strings.Builder
		fmt.Fprintf(&d, "M%s %s", n(xs(s.bins[0].Lo)), n(c.Bottom))
		for i, b := range s.bins {
			if i > 0 && math.Abs(b.Lo-s.bins[i-1].Hi) > 1e-9*b.Lo {
				// A gap (skipped bucket): back to the axis and up again.
				fmt.Fprintf(&d, " L%s %s L%s %s", n(xs(s.bins[i-1].Hi)), n(c.Bottom), n(xs(b.Lo)), n(c.Bottom))
			}
			fmt.Fprintf(&d, " L%s %s L%s %s", n(xs(b.Lo)), n(ys(b.Share)), n(xs(b.Hi)), n(ys(b.Share)))
		}
		fmt.Fprintf(&d, " L%s %s", n(xs(s.bins[len(s.bins)-1].Hi)), n(c.Bottom))
		line := d.String()
		c.Series = append(c.Series, series{
			Name:   s.name,
			Colour: palette[colours[s.name]],
			Line:   line,
			Area:   line + " Z",
		})
	}
	return c
}

// niceScale picks a round step for about ticks intervals from 0 to hi, and
// the first multiple of it at or above hi.
func niceScale(hi float64, ticks int) (step, top float64) {
	if !finite(hi) || hi <= 0 {
		return 1, 1
	}
	raw := hi / float64(ticks)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch f := raw / mag; {
	case f <= 1:
		step = mag
	case f <= 2:
		step = 2 * mag
	case f <= 2.5:
		step = 2.5 * mag
	case f <= 5:
		step = 5 * mag
	default:
		step = 10 * mag
	}
	top = math.Ceil(hi/step-1e-9) * step
	if top <= 0 {
		top = step
	}
	return step, top
}

// Formatting. Every function here prints "—" for NaN and infinities.

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

// n formats an SVG coordinate.
func n(v float64) string {
	if !finite(v) {
		v = 0
	}
	r := math.Round(v*10) / 10
	if r == 0 {
		r = 0 // not -0
	}
	return strconv.FormatFloat(r, 'f', -1, 64)
}

// clip shortens s to at most limit runes.
func clip(s string, limit int) string {
	if r := []rune(s); len(r) > limit {
		return string(r[:limit-1]) + "…"
	}
	return s
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "—"
	}
	return s
}

func plural(k int, one, many string) string {
	if k == 1 {
		return "1 " + one
	}
	return strconv.Itoa(k) + " " + many
}

// count prints an integer with thousands separators.
func count(v int64) string {
	s := strconv.FormatInt(v, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, r := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(r)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

func fixed(v float64, prec int) string {
	if !finite(v) {
		return "—"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func plain(v float64) string {
	if !finite(v) {
		return "—"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}

// sig prints v with three significant digits, never in e-notation.
func sig(v float64) string {
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

// si prints v with a k/M/G suffix.
func si(v float64) string {
	if !finite(v) {
		return "—"
	}
	a := math.Abs(v)
	switch {
	case a >= 999.5e6:
		return trimZero(sig(v/1e9)) + "G"
	case a >= 999.5e3:
		return trimZero(sig(v/1e6)) + "M"
	case a >= 999.5:
		return trimZero(sig(v/1e3)) + "k"
	default:
		return trimZero(sig(v))
	}
}

func trimZero(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

// micros prints a duration given in microseconds.
func micros(us float64) string {
	if !finite(us) {
		return "—"
	}
	a := math.Abs(us)
	switch {
	case a == 0:
		return "0"
	case a < 1:
		return trimZero(sig(us*1e3)) + " ns"
	case a < 999.5:
		return trimZero(sig(us)) + " µs"
	case a < 999.5e3:
		return trimZero(sig(us/1e3)) + " ms"
	default:
		return trimZero(sig(us/1e6)) + " s"
	}
}

func dur(d time.Duration) string {
	if d == 0 {
		return "0"
	}
	return d.String()
}

func bytesPer(v float64) string {
	if !finite(v) {
		return "—"
	}
	a := math.Abs(v)
	switch {
	case a == 0:
		return "0"
	case a < 1024:
		return trimZero(sig(v)) + " B"
	case a < 1024*1024:
		return trimZero(sig(v/1024)) + " KiB"
	default:
		return trimZero(sig(v/(1024*1024))) + " MiB"
	}
}

func ratio(v float64) string {
	if !finite(v) {
		return "—"
	}
	return trimZero(sig(v)) + "×"
}

func percent(v, step float64) string {
	prec := 0
	if step*100 < 1 {
		prec = 1
	}
	if step*100 < 0.1 {
		prec = 2
	}
	return strconv.FormatFloat(v*100, 'f', prec, 64) + "%"
}

var reportTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"n": n,
}).Parse(reportHTML))

const reportHTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>idem benchmark · {{if .OK}}OK{{else}}FAILED{{end}} · {{.Started}}</title>
<style>
:root{--fg:#1f2430;--muted:#667085;--line:#e4e7ec;--bg:#f6f7f9;--card:#fff;--ok:#16803c;--okbg:#e7f6ec;--bad:#c0262d;--badbg:#fdecec;--skip:#6b7280;--skipbg:#f1f2f4}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--fg);font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"Helvetica Neue",Arial,sans-serif}
main{max-width:1320px;margin:0 auto;padding:24px 20px 48px}
h1{font-size:24px;margin:0 0 4px}
h2{font-size:19px;margin:0 0 12px}
h3{font-size:14px;margin:0 0 8px;color:var(--muted);font-weight:600;text-transform:uppercase;letter-spacing:.04em}
.sub{color:var(--muted)}
section,.card{background:var(--card);border:1px solid var(--line);border-radius:10px;padding:18px 20px;margin:16px 0}
.banner{display:flex;align-items:center;gap:18px;border-radius:10px;padding:16px 22px;margin:16px 0;border:2px solid}
.banner .word{font-size:34px;font-weight:800;letter-spacing:.06em}
.banner.ok{background:var(--okbg);border-color:var(--ok);color:var(--ok)}
.banner.fail{background:var(--badbg);border-color:var(--bad);color:var(--bad)}
.banner .why{color:var(--fg)}
.meta{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,2fr);gap:16px}
@media (max-width:820px){.meta{grid-template-columns:1fr}}
dl.two{grid-template-columns:max-content 1fr max-content 1fr}
@media (max-width:560px){dl.two{grid-template-columns:max-content 1fr}}
.meta .card{margin:0}
dl{display:grid;grid-template-columns:max-content 1fr;gap:3px 16px;margin:0}
dt{color:var(--muted)}
dd{margin:0;overflow-wrap:anywhere}
nav{margin-top:8px}
nav a{color:#2f6fdb;text-decoration:none;margin-right:14px}
nav a:hover{text-decoration:underline}
.scroll{overflow-x:auto}
table{border-collapse:collapse;width:100%;font-size:13px;font-variant-numeric:tabular-nums}
th,td{padding:6px 7px;border-bottom:1px solid var(--line);text-align:right;vertical-align:top;white-space:nowrap}
th{font-size:12px;color:var(--muted);font-weight:600;background:#fafbfc}
th:first-child,td:first-child,td.l,th.l{text-align:left}
td.wrap{white-space:normal}
table.narrow{width:auto;min-width:60%}
tbody tr:hover{background:#fafbfc}
.small{font-size:12px;color:var(--muted)}
.sw{display:inline-block;width:10px;height:10px;border-radius:2px;margin-right:7px;vertical-align:0}
.pill{display:inline-block;padding:1px 9px;border-radius:999px;font-size:12px;font-weight:600}
.pill.met{background:var(--okbg);color:var(--ok)}
.pill.notmet{background:var(--badbg);color:var(--bad)}
.pill.skip{background:var(--skipbg);color:var(--skip)}
tr.notmet td:first-child{box-shadow:inset 3px 0 var(--bad)}
tr.met td:first-child{box-shadow:inset 3px 0 var(--ok)}
tr.skip td:first-child{box-shadow:inset 3px 0 #c4c8cf}
.bad{color:var(--bad);font-weight:600}
.good{color:var(--ok)}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f1f2f4;border-radius:4px;padding:1px 5px;margin:0 4px 4px 0;display:inline-block;overflow-wrap:anywhere}
.twice{border-color:var(--bad)}
.twice h2{color:var(--bad)}
.twice ul{margin:0}
.twice li{margin-bottom:6px}
.notes{margin:10px 0 0;padding-left:18px;font-size:13px}
.charts{display:grid;grid-template-columns:repeat(auto-fit,minmax(420px,1fr));gap:16px;margin-top:16px;align-items:start}
.chart{border:1px solid var(--line);border-radius:8px;padding:12px 14px 6px}
svg{display:block;width:100%;height:auto}
svg text{font:12px system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;fill:#475467}
svg .name{fill:var(--fg)}
svg .value{fill:var(--fg);font-weight:600}
svg .axis{stroke:#98a2b3;stroke-width:1}
svg .grid{stroke:#eaecf0;stroke-width:1}
svg .minor{stroke:#f4f5f7;stroke-width:1}
svg .empty{fill:var(--muted);font-size:14px}
svg .badname{fill:var(--bad);font-weight:700}
footer{color:var(--muted);font-size:12px;text-align:center;margin-top:28px}
{{.PaletteCSS}}
</style>
</head>
<body>
<main>
<header>
<h1>idem benchmark report</h1>
<div class="sub">started {{.Started}} · took {{.Duration}}</div>
{{with .Scenarios}}<nav>{{range .}}<a href="#{{.ID}}">{{.Name}}</a>{{end}}{{if $.Targets}}<a href="#targets">targets</a>{{end}}{{if $.Sizes}}<a href="#sizes">sizes</a>{{end}}</nav>{{end}}
</header>

{{if .OK}}<div class="banner ok" id="verdict"><span class="word">OK</span><span class="why">{{.Summary}}</span></div>
{{else}}<div class="banner fail" id="verdict"><span class="word">FAILED</span><span class="why">{{.Summary}}</span></div>
{{end}}

<div class="meta">
<div class="card"><h3>Machine</h3><dl>{{range .Machine}}<dt>{{.K}}</dt><dd>{{.V}}</dd>{{end}}</dl></div>
<div class="card"><h3>Config</h3><dl class="two">{{range .Config}}<dt>{{.K}}</dt><dd>{{.V}}</dd>{{end}}</dl></div>
</div>

{{if .Twice}}<section class="twice" id="ran-twice">
<h2>Keys that ran more than once</h2>
<ul>{{range .Twice}}<li><span class="sw c{{.Colour}}"></span><strong>{{.System}}</strong> in <strong>{{.Scenario}}</strong>: <span class="bad">{{.Count}} keys</span><br>{{range .Keys}}<code>{{.}}</code>{{end}}{{with .More}}<span class="small">{{.}}</span>{{end}}</li>{{end}}</ul>
</section>{{end}}

{{if .Targets}}<section id="targets">
<h2>Targets <span class="small">{{.Met}} met · {{.NotMet}} not met · {{.TargetSkipped}} skipped</span></h2>
<div class="scroll"><table>
<thead><tr><th>target</th><th class="l">goal</th><th class="l">measured</th><th>ratio</th><th class="l">status</th></tr></thead>
<tbody>{{range .Targets}}<tr class="{{.Class}}"><td>{{.Name}}</td><td class="l wrap">{{.Goal}}</td><td class="l wrap">{{.Measured}}</td><td>{{.Ratio}}</td><td class="l wrap"><span class="pill {{.Class}}">{{.Status}}</span>{{with .Reason}} <span class="small">{{.}}</span>{{end}}</td></tr>
{{end}}</tbody></table></div>
</section>{{end}}

{{range .Scenarios}}<section id="{{.ID}}">
<h2>Scenario: {{.Name}}</h2>
<div class="scroll"><table>
<thead><tr><th>system</th><th>calls</th><th>errors</th><th>throughput</th><th>p50</th><th>p99</th><th>p99.9</th>{{if .HasSettle}}<th>settle p50</th><th>settle p99</th>{{end}}<th>executions / keys</th><th>store round trips</th><th>allocs/op</th>{{if .HasRatios}}<th class="l">throughput ratio</th>{{end}}</tr></thead>
<tbody>{{range .Rows}}<tr>
<td><span class="sw c{{.Colour}}"></span><strong>{{.System}}</strong>{{with .Store}}<div class="small">{{.}}</div>{{end}}</td>
<td>{{.Calls}}</td>
<td{{if .ErrorsBad}} class="bad"{{end}}>{{.Errors}}{{with .Wrong}}<div>{{.}}</div>{{end}}</td>
<td><strong>{{.Throughput}}</strong></td>
<td>{{.P50}}</td><td>{{.P99}}</td><td>{{.P999}}</td>
{{if .ShowSettle}}<td>{{.SettleP50}}</td><td>{{.SettleP99}}</td>{{end}}
<td><span{{if .ExecBad}} class="bad"{{end}}>{{.Executions}} / {{.Keys}}</span>{{with .RanTwice}}<div class="bad">{{.}}</div>{{end}}{{range .Outcomes}}<div class="small">{{.}}</div>{{end}}</td>
<td>{{.RoundTrips}}{{with .RoundTripsPerCall}}<div class="small">{{.}}</div>{{end}}{{with .StoreOps}}<div class="small">{{.}} ops</div>{{end}}</td>
<td>{{.Allocs}}<div class="small">{{.Bytes}}/op</div></td>
{{if .ShowRatios}}<td class="l">{{range .Ratios}}<div>{{.}}</div>{{else}}<span class="small">—</span>{{end}}</td>{{end}}
</tr>
{{end}}</tbody></table></div>
{{with .Notes}}<ul class="notes">{{range .}}<li><span class="sw c{{.Colour}}"></span><strong>{{.System}}</strong>, first error: <code>{{.Text}}</code></li>{{end}}</ul>{{end}}
<div class="charts">
{{with .Bars}}{{$c := .}}<div class="chart"><h3>Throughput (calls/s)</h3>
<svg viewBox="0 0 {{n .W}} {{n .H}}" role="img" aria-label="throughput per system">
{{range .Grid}}<line class="grid" x1="{{n .Pos}}" x2="{{n .Pos}}" y1="{{n $c.Top}}" y2="{{n $c.Bottom}}"/>
<text x="{{n .Pos}}" y="{{n $c.Bottom}}" dy="16" text-anchor="middle">{{.Label}}</text>
{{end}}<line class="axis" x1="{{n .Left}}" x2="{{n .Left}}" y1="{{n .Top}}" y2="{{n .Bottom}}"/>
{{range .Bars}}<text class="{{if .Bad}}badname{{else}}name{{end}}" x="{{n $c.Left}}" dx="-8" y="{{n .TextY}}" text-anchor="end">{{if .Bad}}⚠ {{end}}{{.Name}}</text>
<rect x="{{n $c.Left}}" y="{{n .Y}}" width="{{n .W}}" height="{{n .H}}" rx="3" fill="{{.Colour}}"/>
<text class="value" x="{{n .ValueX}}" y="{{n .TextY}}">{{.Value}}</text>
{{end}}{{if .Empty}}<text class="empty" x="{{n .AxisLabelX}}" y="{{n .Top}}" dy="20" text-anchor="middle">no throughput measured</text>{{end}}
<text x="{{n .AxisLabelX}}" y="{{n .AxisLabelY}}" text-anchor="middle">calls per second</text>
</svg></div>{{end}}
{{with .Lat}}{{$c := .}}<div class="chart"><h3>Latency distribution</h3>
<svg viewBox="0 0 {{n .W}} {{n .H}}" role="img" aria-label="latency distribution per system">
{{range .Legend}}<rect x="{{n .X}}" y="{{n .RectY}}" width="22" height="4" rx="1" fill="{{.Colour}}"/><text class="name" x="{{n .X}}" dx="28" y="{{n .Y}}">{{.Name}}</text>
{{end}}{{range .XTicks}}{{$p := .Pos}}<line class="{{if .Major}}grid{{else}}minor{{end}}" x1="{{n .Pos}}" x2="{{n .Pos}}" y1="{{n $c.Top}}" y2="{{n $c.Bottom}}"/>
{{with .Label}}<text x="{{n $p}}" y="{{n $c.Bottom}}" dy="16" text-anchor="middle">{{.}}</text>{{end}}
{{end}}{{range .YTicks}}<line class="grid" x1="{{n $c.Left}}" x2="{{n $c.Right}}" y1="{{n .Pos}}" y2="{{n .Pos}}"/>
<text x="{{n $c.Left}}" dx="-6" y="{{n .Pos}}" dy="4" text-anchor="end">{{.Label}}</text>
{{end}}<line class="axis" x1="{{n .Left}}" x2="{{n .Right}}" y1="{{n .Bottom}}" y2="{{n .Bottom}}"/>
<line class="axis" x1="{{n .Left}}" x2="{{n .Left}}" y1="{{n .Top}}" y2="{{n .Bottom}}"/>
{{range .Series}}<path d="{{.Area}}" fill="{{.Colour}}" fill-opacity="0.08" stroke="none"/>
<path d="{{.Line}}" fill="none" stroke="{{.Colour}}" stroke-width="2" stroke-linejoin="round"/>
{{end}}{{if .Empty}}<text class="empty" x="{{n .MidX}}" y="{{n .MidY}}" text-anchor="middle">no latency histogram recorded</text>{{end}}
<text x="{{n .MidX}}" y="{{n .XLabelY}}" text-anchor="middle">latency per call (log scale)</text>
<text x="0" y="0" transform="translate(14 {{n .MidY}}) rotate(-90)" text-anchor="middle">share of calls</text>
</svg></div>{{end}}
</div>
</section>
{{end}}
{{if .Sizes}}<section id="sizes">
<h2>Sizes</h2>
<div class="scroll"><table class="narrow">
<thead><tr><th>system</th><th>Go heap per in-flight key</th><th>Go heap per record</th>{{if .SizesRedis}}<th>Redis MEMORY USAGE per record</th>{{end}}</tr></thead>
<tbody>{{range .Sizes}}<tr><td><span class="sw c{{.Colour}}"></span><strong>{{.System}}</strong></td><td>{{.InFlight}}</td><td>{{.Record}}</td>{{if $.SizesRedis}}<td>{{.RedisRecord}}</td>{{end}}</tr>
{{end}}</tbody></table></div>
</section>{{end}}
{{if not .Scenarios}}<section><h2>No results</h2><p class="sub">This run recorded no scenario results.</p></section>{{end}}
<footer>idem benchmark harness · report.json holds the same data</footer>
</main>
</body>
</html>
`
