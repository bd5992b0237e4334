package main

import (
	"encoding/json"
	"html"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// fakeLatency makes a latency summary of calls spread log-normally around
// median µs (sigma in decades), with a share of them in a second bump at
// tail µs, bucketed as the harness does: 10 log-spaced buckets per decade.
func fakeLatency(calls int64, median, sigma, tail, tailShare float64) Latency {
	l := Latency{Count: calls}
	if calls == 0 {
		return l
	}
	lo := math.Floor((math.Log10(median) - 4*sigma) * 10)
	hi := math.Ceil((math.Log10(math.Max(median, tail)) + 4*sigma) * 10)
	var weights []float64
	var sum float64
	for k := lo; k <= hi; k++ {
		l.UpperUS = append(l.UpperUS, math.Round(math.Pow(10, k/10)*1000)/1000)
		mid := (k - 0.5) / 10
		w := (1 - tailShare) * math.Exp(-0.5*math.Pow((mid-math.Log10(median))/sigma, 2))
		if tailShare > 0 {
			w += tailShare * math.Exp(-0.5*math.Pow((mid-math.Log10(tail))/(sigma/2), 2))
		}
		weights = append(weights, w)
		sum += w
	}
	var seen int64
	for _, w := range weights {
		c := int64(math.Round(w / sum * float64(calls)))
		l.Counts = append(l.Counts, c)
		seen += c
	}
	l.Count = seen
	quantile := func(q float64) float64 {
		want := int64(math.Ceil(q * float64(seen)))
		var acc int64
		for i, c := range l.Counts {
			acc += c
			if acc >= want && c > 0 {
				return l.UpperUS[i]
			}
		}
		return l.UpperUS[len(l.UpperUS)-1]
	}
	l.Mean = median * 1.2
	l.P50, l.P90, l.P99, l.P999 = quantile(0.5), quantile(0.9), quantile(0.99), quantile(0.999)
	l.Max = l.UpperUS[len(l.UpperUS)-1]
	return l
}

const nastyKey = `<b>"storm-7"&amp;</b>`

// fakeReport is a plausible run: two scenarios of three systems, with the
// poll baseline running keys twice in the storm, one target not met and one
// skipped.
func fakeReport() *Report {
	started := time.Date(2026, 12, 2, 17, 30, 0, 0, time.UTC)
	r := &Report{
		Started:  started,
		Duration: "14.2s",
		Machine: Machine{
			GoVersion: "go1.26.8", OS: "linux", Arch: "amd64", CPUs: 2, GOMAXPROCS: 2,
			CPUModel: "AMD EPYC 7B13",
		},
		Config: Config{
			Store: "memory", Duration: time.Second, Concurrency: 64, Keys: 10000,
			StormSize: 1000, DupRatio: 0.5, Dist: "zipf", Settle: 3 * time.Second,
			SlowWork: 20 * time.Millisecond, StormWork: time.Millisecond,
			Scenarios: []string{"unique", "storm"}, Systems: []string{"idem", "mutex-map", "poll"},
			Out: "/tmp/bench", RedisBench: true, PollInterval: 50 * time.Millisecond,
		},
	}
	type sys struct {
		name          string
		tput          float64
		median, sigma float64
		tail, tailSh  float64
	}
	unique := []sys{
		{"idem", 1_480_000, 1.1, 0.35, 40, 0.01},
		{"mutex-map", 910_000, 1.9, 0.3, 90, 0.02},
		{"poll", 655_000, 2.6, 0.3, 0, 0},
	}
	storm := []sys{
		{"idem", 2_310_000, 0.9, 0.3, 1100, 0.002},
		{"mutex-map", 1_020_000, 1.6, 0.45, 1200, 0.003},
		{"poll", 19_500, 14, 0.4, 52_000, 0.35},
	}
	for _, sc := range []struct {
		name string
		sys  []sys
	}{{"unique", unique}, {"storm", storm}} {
		for _, s := range sc.sys {
			calls := int64(s.tput)
			res := Result{
				Scenario: sc.name, System: s.name, Store: "memory",
				Calls: calls, Seconds: 1, Throughput: s.tput,
				Latency:         fakeLatency(calls, s.median, s.sigma, s.tail, s.tailSh),
				Executions:      calls,
				KeysCompleted:   calls,
				StoreRoundTrips: calls / 7,
				StoreOps:        calls,
				AllocsPerOp:     3.2,
				BytesPerOp:      212,
				Outcomes:        map[string]int64{"executed": calls},
			}
			if s.name == "poll" {
				res.StoreRoundTrips, res.AllocsPerOp, res.BytesPerOp = calls*3, 9.5, 640
			}
			if sc.name == "storm" {
				keys := calls / 1000
				res.Executions, res.KeysCompleted = keys, keys
				res.Outcomes = map[string]int64{"executed": keys, "joined": calls - keys}
				res.Settle = fakeLatency(calls-keys, s.median*3, s.sigma, 0, 0)
				if s.name == "poll" {
					res.Executions = keys + 37
					res.RanTwiceCount = 37
					res.RanTwice = []string{"storm-1", "storm-3", nastyKey, "storm-12", "storm-15"}
					res.FirstError = "claim storm-3: context deadline exceeded"
					res.Errors = 4
				}
			}
			r.Results = append(r.Results, res)
		}
	}
	// Ratios on the idem rows.
	for i := range r.Results {
		if r.Results[i].System != "idem" {
			continue
		}
		r.Results[i].Ratios = map[string]float64{}
		for _, o := range r.Results {
			if o.Scenario == r.Results[i].Scenario && o.System != "idem" {
				r.Results[i].Ratios[o.System] = r.Results[i].Throughput / o.Throughput
			}
		}
	}
	r.Targets = []Target{
		{Name: "storm: one execution per key", Goal: "executions == keys", Measured: "idem: 2,310 == 2,310", Met: true},
		{Name: "unique: throughput vs mutex-map", Goal: "≥ 1.5×", Measured: "1.63×", Ratio: 1.63, Met: true},
		{Name: "storm: settle p99", Goal: "≤ 1 ms", Measured: "4.1 ms", Ratio: 4.1, Met: false},
		{Name: "redis: pipelining vs redis-benchmark", Goal: "≥ 0.8×", Skipped: "needs -redis; this run used the memory store"},
	}
	r.Sizes = []Sizes{
		{System: "idem", BytesPerInFlightKey: 412, BytesPerRecord: 168},
		{System: "mutex-map", InFlightUnsound: "the heap did not grow in 4 of 6 rounds: other memory was freed meanwhile", BytesPerRecord: 120},
		{System: "poll", BytesPerInFlightKey: 1536, BytesPerRecord: 96},
	}
	r.OK = false
	return r
}

func renderHTML(t *testing.T, r *Report) string {
	t.Helper()
	dir := t.TempDir()
	if err := writeHTML(dir, r); err != nil {
		t.Fatalf("writeHTML: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var hrefRE = regexp.MustCompile(`(?i)\b(href|src|xlink:href)\s*=\s*"([^"]*)"`)

// checkSelfContained fails unless the page is one file that loads nothing:
// no scripts, styles, fonts or images from elsewhere, no links out.
func checkSelfContained(t *testing.T, page string) {
	t.Helper()
	lower := strings.ToLower(page)
	for _, bad := range []string{
		`src="http`, `href="http`, `<script src`, // the brief's three
		"<script", "<link", "<img", "<iframe", "<object", "<embed", "@import", "url(", "http:", "https:", "//cdn",
	} {
		if strings.Contains(lower, bad) {
			t.Errorf("page contains %q: not self-contained", bad)
		}
	}
	for _, m := range hrefRE.FindAllStringSubmatch(page, -1) {
		if m[1] != "href" || !strings.HasPrefix(m[2], "#") {
			t.Errorf("page refers outside itself: %s", m[0])
		}
	}
}

func checkNoNaN(t *testing.T, page string) {
	t.Helper()
	for _, bad := range []string{"NaN", "Inf", "%!"} { // %! is a fmt mistake
		if i := strings.Index(page, bad); i >= 0 {
			t.Errorf("page contains %q: …%s…", bad, page[max(i-80, 0):min(i+40, len(page))])
		}
	}
}

// checkBalanced counts opening and closing tags of the elements that must
// nest for the page to render.
func checkBalanced(t *testing.T, page string) {
	t.Helper()
	for _, tag := range []string{"html", "head", "body", "main", "section", "table", "thead", "tbody", "tr", "svg", "div", "ul", "li", "dl", "text", "style"} {
		open := len(regexp.MustCompile(`<`+tag+`[\s>]`).FindAllStringIndex(page, -1))
		closed := strings.Count(page, "</"+tag+">")
		if open != closed {
			t.Errorf("<%s>: %d opened, %d closed", tag, open, closed)
		}
	}
}

func TestWriteHTML(t *testing.T) {
	r := fakeReport()
	page := renderHTML(t, r)
	checkSelfContained(t, page)
	checkNoNaN(t, page)
	checkBalanced(t, page)

	scenarios := map[string]bool{}
	for _, res := range r.Results {
		scenarios[res.Scenario] = true
	}
	// Promised: a throughput chart and a latency chart per scenario.
	if got, want := strings.Count(page, "<svg"), 2*len(scenarios); got != want {
		t.Errorf("%d <svg> elements, want %d (2 per scenario)", got, want)
	}
	if got := strings.Count(page, `aria-label="throughput per system"`); got != len(scenarios) {
		t.Errorf("%d throughput charts, want %d", got, len(scenarios))
	}
	if got := strings.Count(page, `aria-label="latency distribution per system"`); got != len(scenarios) {
		t.Errorf("%d latency charts, want %d", got, len(scenarios))
	}
	// Each latency chart draws one line per system that has a histogram.
	if got, want := strings.Count(page, `stroke-width="2"`), len(r.Results); got != want {
		t.Errorf("%d latency series, want %d", got, want)
	}

	text := html.UnescapeString(page)
	for sc := range scenarios {
		if !strings.Contains(text, "Scenario: "+sc) {
			t.Errorf("no section for scenario %q", sc)
		}
	}
	for _, res := range r.Results {
		if !strings.Contains(text, res.System) {
			t.Errorf("system %q missing", res.System)
		}
	}
	for _, want := range []string{
		"idem benchmark report", "2026-12-02 17:30:00 UTC", "14.2 s", "go1.26.8", "AMD EPYC 7B13", "GOMAXPROCS",
		"storm size", "1,000", "50 ms",
		"Keys that ran more than once", "storm-12", nastyKey, "37 keys", "and 32 more", "37 ran twice",
		"not met", "skipped", "needs -redis; this run used the memory store", "≥ 1.5×",
		"settle p50", "context deadline exceeded", "1.48M/s", "joined",
		"Sizes", "1.5 KiB", "412 B", "not measured (the heap did not grow in 4 of 6 rounds",
		"latency per call (log scale)", "share of calls", "calls per second",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// The key is shown, escaped: its markup must not reach the page.
	if strings.Contains(page, nastyKey) || strings.Contains(page, `<b>"storm`) {
		t.Error("a ran-twice key was not escaped")
	}

	// The banner follows Report.OK.
	if !strings.Contains(page, `class="banner fail"`) || !strings.Contains(page, ">FAILED<") || strings.Contains(page, `class="banner ok"`) {
		t.Error("OK=false: want the FAILED banner and no OK banner")
	}
	r.OK = true
	r.Results[len(r.Results)-1].RanTwice, r.Results[len(r.Results)-1].RanTwiceCount = nil, 0
	page = renderHTML(t, r)
	if !strings.Contains(page, `class="banner ok"`) || !strings.Contains(page, ">OK<") || strings.Contains(page, "FAILED") {
		t.Error("OK=true: want the OK banner and no FAILED")
	}
	if strings.Contains(page, "Keys that ran more than once") {
		t.Error("the ran-twice list shows with no key run twice")
	}
}

func TestWriteHTMLEmpty(t *testing.T) {
	for name, r := range map[string]*Report{"zero": {}, "nil": nil} {
		t.Run(name, func(t *testing.T) {
			page := renderHTML(t, r)
			checkSelfContained(t, page)
			checkNoNaN(t, page)
			checkBalanced(t, page)
			if strings.Count(page, "<svg") != 0 {
				t.Error("charts drawn with no results")
			}
			for _, want := range []string{"No results", ">FAILED<", "idem benchmark report"} {
				if !strings.Contains(page, want) {
					t.Errorf("page lacks %q", want)
				}
			}
		})
	}
}

// TestWriteHTMLDegenerate feeds values a broken run could produce: zeros,
// NaN and infinities, histograms of mismatched lengths or bad bounds.
func TestWriteHTMLDegenerate(t *testing.T) {
	nan, inf := math.NaN(), math.Inf(1)
	r := &Report{
		Config: Config{Systems: []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}},
		Results: []Result{
			{Scenario: "zero", System: "a"},
			{Scenario: "zero", System: "b", Latency: Latency{UpperUS: []float64{1, 2}, Counts: []int64{0, 0}}},
			{Scenario: "nan", System: "c", Throughput: nan, AllocsPerOp: inf, BytesPerOp: nan,
				Latency: Latency{P50: nan, P99: inf, P999: -inf, UpperUS: []float64{nan, inf, -1, 0}, Counts: []int64{5, 5, 5, 5}},
				Settle:  Latency{Count: 3, P50: nan},
				Ratios:  map[string]float64{"x": nan, "y": inf}},
			{Scenario: "nan", System: "d", Throughput: inf},
			{Scenario: "odd", System: "e", Throughput: -5, Calls: -3,
				Latency: Latency{UpperUS: []float64{10, 5, 20, 1e300}, Counts: []int64{1, 2, 3}}},
			{Scenario: "odd", System: "f", Throughput: 1,
				Latency: Latency{UpperUS: []float64{3}, Counts: []int64{9, 9, 9}}},
			{Scenario: "odd", System: "a very long system name that goes on and on"},
			{Scenario: "odd", System: "g"}, {Scenario: "odd", System: "h"},
			{Scenario: "odd", System: "i"}, {Scenario: "odd", System: "j"},
		},
		Targets: []Target{{Name: "t", Ratio: nan}, {Name: "u", Ratio: inf, Met: true}},
		Sizes:   []Sizes{{System: "a", BytesPerInFlightKey: nan, BytesPerRecord: inf, RedisBytesPerRecord: -inf}},
	}
	page := renderHTML(t, r)
	checkSelfContained(t, page)
	checkNoNaN(t, page)
	checkBalanced(t, page)
	if got := strings.Count(page, "<svg"); got != 6 {
		t.Errorf("%d <svg>, want 6", got)
	}
	for _, want := range []string{"no latency histogram recorded", "no throughput measured"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestChartNumbers checks what charts.go adds to format.go: SVG
// coordinates (never NaN) and round scales.
func TestChartNumbers(t *testing.T) {
	for _, c := range []struct{ got, want string }{
		{n(math.NaN()), "0"}, {n(math.Inf(1)), "0"}, {n(12.345), "12.3"}, {n(-0.04), "0"}, {n(130), "130"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
	for _, hi := range []float64{0, 1, 7, 0.003, 1e7, math.NaN()} {
		step, top := niceScale(hi, 5)
		if !(step > 0) || !(top >= step) || (finite(hi) && top < hi) || top/step > 11 {
			t.Errorf("niceScale(%v) = %v, %v", hi, step, top)
		}
	}
}

// TestWriteHTMLFixture writes the fake report as report.html and
// report.json into $BENCH_HTML_FIXTURE_DIR, for scripts/check-report
// --fake to render in a browser. Skipped unless that is set.
func TestWriteHTMLFixture(t *testing.T) {
	dir := os.Getenv("BENCH_HTML_FIXTURE_DIR")
	if dir == "" {
		t.Skip("set BENCH_HTML_FIXTURE_DIR to write the fixture report there")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	r := fakeReport()
	if err := writeHTML(dir, r); err != nil {
		t.Fatal(err)
	}
	if err := writeJSON(dir, r); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", filepath.Join(dir, "report.html"))
}

// Every target of issue 15 is a row of the page and of report.json, with
// its status, ratio and, when skipped, the flags that run it.
func TestReportTargets(t *testing.T) {
	cfg := storeConfig("memory")
	r := &Report{Config: cfg, Results: memoryResults(), OK: true}
	r.Targets = targets(cfg, r.Results, nil, 2)
	page := renderHTML(t, r)
	checkNoNaN(t, page)
	checkBalanced(t, page)
	text := html.UnescapeString(page)
	for _, tg := range r.Targets {
		if !strings.Contains(text, tg.Name) || !strings.Contains(text, tg.Goal) {
			t.Errorf("page lacks target %q", tg.Name)
		}
	}
	for _, want := range []string{"2 met · 0 not met · 8 skipped", "1.2×", "0.6×", "needs -redis host:port", "settle max"} {
		if !strings.Contains(text, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	dir := t.TempDir()
	if err := writeJSON(dir, r); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Targets) != len(r.Targets) {
		t.Fatalf("report.json: %d targets, want %d", len(back.Targets), len(r.Targets))
	}
	for i, tg := range back.Targets {
		if tg != r.Targets[i] {
			t.Errorf("report.json target %d: %+v, want %+v", i, tg, r.Targets[i])
		}
	}
}
