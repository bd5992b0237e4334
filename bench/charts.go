package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// The report's two charts per scenario: a bar chart of throughput and a
// latency histogram. Each is a struct of coordinates and labels that the
// template draws as inline SVG. Sizes are in SVG user units; the SVG scales
// to its box.

const (
	chartW   = 520.0
	barRow   = 34.0
	barThick = 22.0
)

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

// buildBars draws one bar per system: its throughput on a linear scale from
// zero.
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
			Value:  rate(res.Throughput),
			Colour: palette[colours[res.System]],
			Bad:    res.ranTwice() > 0,
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

// systemBins is one system's histogram, ready to plot.
type systemBins struct {
	name string
	bins []bin
}

// buildLatency draws each system's latency histogram as a step line: the
// share of calls per bucket over a log scale of latency.
func buildLatency(results []Result, colours map[string]int) latencyChart {
	c := latencyChart{W: chartW, Left: 52, Right: chartW - 26}
	c.placeLegend(results, colours)
	c.Bottom = c.Top + 220
	c.H = c.Bottom + 48
	c.MidX = (c.Left + c.Right) / 2
	c.MidY = (c.Top + c.Bottom) / 2
	c.XLabelY = c.H - 6

	all, lo, hi, top := histograms(results)
	if len(all) == 0 || !(hi > lo) || top <= 0 {
		c.Empty = true
		lo, hi, top = 1, 1000, 1
	}
	xs := c.xAxis(lo, hi)
	ys := c.yAxis(top)
	// Drawn last to first, so that the first system (idem, as configured)
	// is on top where lines coincide.
	for i := len(all) - 1; i >= 0; i-- {
		line := stepPath(all[i].bins, xs, ys, c.Bottom)
		c.Series = append(c.Series, series{
			Name:   all[i].name,
			Colour: palette[colours[all[i].name]],
			Line:   line,
			Area:   line + " Z",
		})
	}
	return c
}

// placeLegend lays the legend out in rows along the top, wrapped to the
// width, and sets c.Top below it.
func (c *latencyChart) placeLegend(results []Result, colours map[string]int) {
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
}

// histograms returns the systems that have a histogram, the lowest and
// highest bucket bound among them and the largest share in any bucket.
func histograms(results []Result) (all []systemBins, lo, hi, top float64) {
	lo = math.Inf(1)
	for _, res := range results {
		bs := bins(res.Latency)
		if len(bs) == 0 {
			continue
		}
		all = append(all, systemBins{res.System, bs})
		lo = math.Min(lo, bs[0].Lo)
		hi = math.Max(hi, bs[len(bs)-1].Hi)
		for _, b := range bs {
			top = math.Max(top, b.Share)
		}
	}
	return all, lo, hi, top
}

// xAxis sets the log-scale x ticks for latencies from lo to hi µs, widened
// to whole decades, and returns the scale.
func (c *latencyChart) xAxis(lo, hi float64) func(us float64) float64 {
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
	return xs
}

// yAxis sets the linear y ticks for shares from 0 to about top, and
// returns the scale.
func (c *latencyChart) yAxis(top float64) func(share float64) float64 {
	step, ytop := niceScale(top, 5)
	ys := func(s float64) float64 { return c.Bottom - s/ytop*(c.Bottom-c.Top) }
	for v := 0.0; v <= ytop*(1+1e-9); v += step {
		c.YTicks = append(c.YTicks, tick{Pos: ys(v), Label: percent(v, step)})
	}
	return ys
}

// stepPath is the SVG path of a histogram's outline, from the x axis (at
// y bottom) up and along each bucket and back down to the axis.
func stepPath(bins []bin, xs, ys func(float64) float64, bottom float64) string {
	var d strings.Builder
	fmt.Fprintf(&d, "M%s %s", n(xs(bins[0].Lo)), n(bottom))
	for i, b := range bins {
		if i > 0 && math.Abs(b.Lo-bins[i-1].Hi) > 1e-9*b.Lo {
			// A gap (skipped bucket): back to the axis and up again.
			fmt.Fprintf(&d, " L%s %s L%s %s", n(xs(bins[i-1].Hi)), n(bottom), n(xs(b.Lo)), n(bottom))
		}
		fmt.Fprintf(&d, " L%s %s L%s %s", n(xs(b.Lo)), n(ys(b.Share)), n(xs(b.Hi)), n(ys(b.Share)))
	}
	fmt.Fprintf(&d, " L%s %s", n(xs(bins[len(bins)-1].Hi)), n(bottom))
	return d.String()
}

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

// n formats an SVG coordinate, to a tenth of a unit. Unlike the number
// formatters in format.go it never prints noValue: NaN and infinities
// become 0, so that a broken value cannot break the SVG.
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
