package report

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gymlens/gymlens/contract"
)

// The SVG half of the page: charts reduced to shapes in a coordinate
// space of their own, and the axis arithmetic behind them. The template
// (assets/page.html.tmpl) draws the shapes; nothing here writes markup.

// svgChart is a chart reduced to shapes in a W by H coordinate space; the
// SVG scales to the width of its container.
type svgChart struct {
	ID, Label string
	W, H      int
	// Wide charts keep a minimum width and scroll on narrow screens
	// rather than shrink their text out of reading.
	Wide   bool
	Grid   []svgLine
	Rects  []svgRect
	Paths  []svgPath
	Lines  []svgLine
	Dots   []svgDot
	Texts  []svgText
	Legend []htmlLegend
}

type svgRect struct {
	X, Y, W, H float64
	Class      string
	Title      string
}

type svgPath struct{ D, Class string }

type svgLine struct {
	X1, Y1, X2, Y2 float64
	Class          string
}

type svgDot struct {
	X, Y, R float64
	Class   string
	Title   string
}

type svgText struct {
	X, Y   float64
	Text   string
	Anchor string
	Class  string
}

// Chart geometry, in SVG user units.
const (
	// halfW is the width of the charts drawn two side by side, wideW of
	// those that take a section's whole width; the page shows them at
	// that size or smaller, so their text stays the size it was set in.
	halfW     = 540
	wideW     = 1080
	chartH    = 230
	stripH    = 130
	chartPadL = 52
	chartPadR = 26
	chartPadT = 24
	chartPadB = 42
)

// histogramChart draws the bucket counts of h: the buckets from the first
// to the last non-empty one, with an empty neighbour on each side for
// context.
func histogramChart(id, label string, h *Histogram, unit string) *svgChart {
	first, last, peak := h.nonEmpty()
	if first < 0 {
		return nil
	}
	lo, hi := max(0, first-1), min(len(h.Counts)-1, last+1)
	n := hi - lo + 1
	c := &svgChart{ID: id, Label: label, W: halfW, H: chartH}
	x0, x1, y0, y1 := float64(chartPadL), float64(halfW-chartPadR), float64(chartPadT), float64(chartH-chartPadB)
	top, ticks := niceAxis(float64(peak), 4, true)
	yOf := func(v float64) float64 { return y1 - v/top*(y1-y0) }
	c.yGrid(ticks, yOf, x0, x1, fmtCount)
	slot := (x1 - x0) / float64(n)
	every := (n + 11) / 12 // label at most 12 buckets
	for i := lo; i <= hi; i++ {
		k := i - lo
		cnt := h.Counts[i]
		xm := x0 + slot*(float64(k)+0.5)
		if cnt > 0 {
			bw := slot * 0.78
			y := yOf(float64(cnt))
			c.Rects = append(c.Rects, svgRect{X: xm - bw/2, Y: y, W: bw, H: y1 - y, Class: "bar s0",
				Title: fmt.Sprintf("%s %s: %d values", bucketLabel(h.Bounds, i), unit, cnt)})
			c.Texts = append(c.Texts, svgText{X: xm, Y: y - 4, Text: strconv.FormatUint(cnt, 10), Anchor: "middle", Class: "val"})
		}
		if k%every == 0 || i == first || i == last {
			c.Texts = append(c.Texts, svgText{X: xm, Y: y1 + 15, Text: shortBucketLabel(h.Bounds, i), Anchor: "middle", Class: "tick"})
		}
	}
	c.Lines = append(c.Lines, svgLine{X1: x0, Y1: y1, X2: x1, Y2: y1, Class: "axis"})
	c.Texts = append(c.Texts,
		svgText{X: (x0 + x1) / 2, Y: chartH - 6, Text: "bucket (upper bound, " + unit + ")", Anchor: "middle", Class: "cap"},
		svgText{X: 4, Y: 10, Text: "values", Anchor: "start", Class: "cap"})
	c.Legend = []htmlLegend{{"s0", "values recorded in the bucket (last export, all processes)"}}
	return c
}

func shortBucketLabel(bounds []float64, i int) string {
	switch {
	case len(bounds) == 0:
		return "all"
	case i >= len(bounds):
		return "> " + fmtNum(bounds[len(bounds)-1])
	}
	return "≤ " + fmtNum(bounds[i])
}

// maxStripDots caps the dots of a strip chart; longer runs are thinned by
// rank, which keeps the shape of the distribution.
const maxStripDots = 600

// stripChart draws every duration as a dot on a time axis, with the
// exact p50, p90 and p99 marked.
func stripChart(id, label string, ds []time.Duration) *svgChart {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	c := &svgChart{ID: id, Label: label, W: halfW, H: stripH}
	x0, x1 := float64(chartPadL), float64(halfW-chartPadR)
	yTop, yAxis := 50.0, float64(stripH-30)
	lo, hi, ticks := niceRange(ms(ds[0]), ms(ds[len(ds)-1]), 6)
	xOf := func(v float64) float64 { return x0 + (v-lo)/(hi-lo)*(x1-x0) }
	for _, t := range ticks {
		x := xOf(t)
		c.Grid = append(c.Grid, svgLine{X1: x, Y1: yTop - 8, X2: x, Y2: yAxis, Class: "grid"})
		c.Texts = append(c.Texts, svgText{X: x, Y: yAxis + 15, Text: fmtTickMS(t), Anchor: "middle", Class: "tick"})
	}
	c.Lines = append(c.Lines, svgLine{X1: x0, Y1: yAxis, X2: x1, Y2: yAxis, Class: "axis"})
	n := min(len(ds), maxStripDots)
	band := yAxis - 6 - yTop
	for k := range n {
		i := k
		if len(ds) > n {
			i = int(math.Round(float64(k) * float64(len(ds)-1) / float64(n-1)))
		}
		// A fixed scatter across the band keeps equal values apart.
		y := yTop + band*float64((k*7)%11)/10
		c.Dots = append(c.Dots, svgDot{X: xOf(ms(ds[i])), Y: y, R: 3.5, Class: "dot s0", Title: fmtDuration(ds[i])})
	}
	marks := []struct {
		q     float64
		name  string
		class string
	}{{0.5, "p50", "q50"}, {0.9, "p90", "q90"}, {0.99, "p99", "q99"}}
	for i, m := range marks {
		v := DurationQuantile(ds, m.q)
		x := xOf(ms(v))
		c.Lines = append(c.Lines, svgLine{X1: x, Y1: yTop - 8, X2: x, Y2: yAxis, Class: "mark " + m.class})
		anchor, dx := "start", 3.0
		if x > x1-60 {
			anchor, dx = "end", -3
		}
		c.Texts = append(c.Texts, svgText{X: x + dx, Y: 10 + 11*float64(i), Text: m.name, Anchor: anchor, Class: "mk " + m.class})
		c.Legend = append(c.Legend, htmlLegend{Class: "mark " + m.class, Label: m.name + " " + fmtDuration(v)})
	}
	dots := fmt.Sprintf("one dot per span (%d)", len(ds))
	if len(ds) > n {
		dots = fmt.Sprintf("%d of %d spans, evenly by rank", n, len(ds))
	}
	c.Legend = append([]htmlLegend{{"s0", dots}}, c.Legend...)
	return c
}

// windowsChart draws the fleet's verifications per window as stacked bars
// (succeeded, failed; left axis) and the success fraction as a step line
// (right axis).
func windowsChart(id string, ws []Window) *svgChart {
	c := &svgChart{ID: id, Label: "fleet verify calls and success per window", W: wideW, H: chartH, Wide: true}
	x0, x1, y0, y1 := float64(chartPadL), float64(wideW-52), float64(chartPadT), float64(chartH-chartPadB)
	peak := 0.0
	for _, w := range ws {
		peak = math.Max(peak, w.Calls())
	}
	top, ticks := niceAxis(peak, 4, true)
	yOf := func(v float64) float64 { return y1 - v/top*(y1-y0) }
	fOf := func(f float64) float64 { return y1 - f*(y1-y0) }
	c.yGrid(ticks, yOf, x0, x1, fmtCount)
	for _, f := range []float64{0, 0.25, 0.5, 0.75, 1} {
		c.Texts = append(c.Texts, svgText{X: x1 + 5, Y: fOf(f) + 4, Text: fmt.Sprintf("%.0f%%", f*100), Anchor: "start", Class: "tick rt"})
	}
	slot := (x1 - x0) / float64(len(ws))
	every := (len(ws) + 7) / 8
	var line strings.Builder
	prevFrac := false
	for i, w := range ws {
		sx := x0 + slot*float64(i)
		bw := slot * 0.7
		bx := sx + (slot-bw)/2
		span := fmtOffset(w.From) + " to " + fmtOffset(w.To)
		if w.Success > 0 {
			c.Rects = append(c.Rects, svgRect{X: bx, Y: yOf(w.Success), W: bw, H: y1 - yOf(w.Success), Class: "bar okc",
				Title: fmt.Sprintf("%s: %s succeeded", span, fmtCount(w.Success))})
		}
		if w.Failure > 0 {
			c.Rects = append(c.Rects, svgRect{X: bx, Y: yOf(w.Calls()), W: bw, H: yOf(w.Success) - yOf(w.Calls()), Class: "bar err",
				Title: fmt.Sprintf("%s: %s failed", span, fmtCount(w.Failure))})
		}
		if i%every == 0 {
			c.Texts = append(c.Texts, svgText{X: sx, Y: y1 + 15, Text: fmtAxisOffset(w.From), Anchor: "middle", Class: "tick"})
		}
		f := w.Fraction()
		if math.IsNaN(f) {
			prevFrac = false
			continue
		}
		y := fOf(f)
		if prevFrac {
			fmt.Fprintf(&line, " V%.1f H%.1f", y, sx+slot)
		} else {
			fmt.Fprintf(&line, " M%.1f %.1f H%.1f", sx, y, sx+slot)
		}
		prevFrac = true
		c.Dots = append(c.Dots, svgDot{X: sx + slot/2, Y: y, R: 3.5, Class: "dot ln-dot",
			Title: fmt.Sprintf("%s: %s of %s succeeded (%s)", span, fmtCount(w.Success), fmtCount(w.Calls()), fmtPercent(f))})
	}
	c.Texts = append(c.Texts, svgText{X: x1, Y: y1 + 15, Text: fmtAxisOffset(ws[len(ws)-1].To), Anchor: "middle", Class: "tick"})
	if line.Len() > 0 {
		c.Paths = append(c.Paths, svgPath{D: strings.TrimSpace(line.String()), Class: "ln frac"})
	}
	c.Lines = append(c.Lines, svgLine{X1: x0, Y1: y1, X2: x1, Y2: y1, Class: "axis"})
	c.Texts = append(c.Texts,
		svgText{X: (x0 + x1) / 2, Y: chartH - 6, Text: "time since the run's first telemetry record", Anchor: "middle", Class: "cap"},
		svgText{X: 4, Y: 10, Text: "calls", Anchor: "start", Class: "cap"},
		svgText{X: wideW - 4, Y: 10, Text: "success", Anchor: "end", Class: "cap"})
	c.Legend = []htmlLegend{{"okc", "succeeded"}, {"err", "failed (the verifier errored)"}, {"frac", "success fraction (right axis)"}}
	return c
}

// activeChart draws each process's gym.servers.active readings as a step
// line over the run's time.
func activeChart(id string, r *Run, readings []GaugeReading, swatch map[*Process]string) *svgChart {
	c := &svgChart{ID: id, Label: contract.ServersActive + " over time", W: wideW, H: chartH, Wide: true}
	x0, x1, y0, y1 := float64(chartPadL), float64(wideW-chartPadR), float64(chartPadT), float64(chartH-chartPadB)
	peak, end := 0.0, 0.0
	for _, g := range readings {
		peak = math.Max(peak, g.Value)
		end = math.Max(end, float64(r.Offset(g.Time))/float64(time.Millisecond))
	}
	end = math.Max(end, float64(r.Duration())/float64(time.Millisecond))
	top, yticks := niceAxis(peak, 4, true)
	right, xticks := niceAxis(end, 6, false)
	yOf := func(v float64) float64 { return y1 - math.Max(0, v)/top*(y1-y0) }
	xOf := func(at time.Time) float64 {
		ms := float64(r.Offset(at)) / float64(time.Millisecond)
		return x0 + math.Max(0, ms)/right*(x1-x0)
	}
	c.yGrid(yticks, yOf, x0, x1, fmtCount)
	for _, t := range xticks {
		x := x0 + t/right*(x1-x0)
		c.Texts = append(c.Texts, svgText{X: x, Y: y1 + 15, Text: fmtTickMS(t), Anchor: "middle", Class: "tick"})
	}
	if !r.Start.IsZero() {
		x := xOf(r.End)
		c.Lines = append(c.Lines, svgLine{X1: x, Y1: y0, X2: x, Y2: y1, Class: "mark runend"})
	}
	var order []*Process
	byProc := map[*Process][]GaugeReading{}
	for _, g := range readings {
		if byProc[g.Process] == nil {
			order = append(order, g.Process)
		}
		byProc[g.Process] = append(byProc[g.Process], g)
	}
	for _, proc := range order {
		gs := byProc[proc]
		var line, area strings.Builder
		for i, g := range gs {
			x, y := xOf(g.Time), yOf(g.Value)
			if i == 0 {
				fmt.Fprintf(&line, "M%.1f %.1f", x, y)
				fmt.Fprintf(&area, "M%.1f %.1f V%.1f", x, y1, y)
			} else {
				fmt.Fprintf(&line, " H%.1f V%.1f", x, y)
				fmt.Fprintf(&area, " H%.1f V%.1f", x, y)
			}
			c.Dots = append(c.Dots, svgDot{X: x, Y: y, R: 3, Class: "dot " + swatch[proc],
				Title: fmt.Sprintf("%s: %s active (%s)", fmtOffset(r.Offset(g.Time)), fmtCount(g.Value), proc.Name())})
		}
		fmt.Fprintf(&area, " V%.1f Z", y1)
		c.Paths = append(c.Paths, svgPath{D: area.String(), Class: "area " + swatch[proc]},
			svgPath{D: line.String(), Class: "ln " + swatch[proc]})
		c.Legend = append(c.Legend, htmlLegend{Class: swatch[proc], Label: proc.Name()})
	}
	c.Lines = append(c.Lines, svgLine{X1: x0, Y1: y1, X2: x1, Y2: y1, Class: "axis"})
	c.Texts = append(c.Texts,
		svgText{X: (x0 + x1) / 2, Y: chartH - 6, Text: "time since the run's first telemetry record", Anchor: "middle", Class: "cap"},
		svgText{X: 4, Y: 10, Text: "servers", Anchor: "start", Class: "cap"})
	if !r.Start.IsZero() {
		c.Legend = append(c.Legend, htmlLegend{"mark runend", "last telemetry record"})
	}
	return c
}

// yGrid adds horizontal grid lines with labels at the given values.
func (c *svgChart) yGrid(ticks []float64, yOf func(float64) float64, x0, x1 float64, label func(float64) string) {
	for _, t := range ticks {
		y := yOf(t)
		c.Grid = append(c.Grid, svgLine{X1: x0, Y1: y, X2: x1, Y2: y, Class: "grid"})
		c.Texts = append(c.Texts, svgText{X: x0 - 6, Y: y + 4, Text: label(t), Anchor: "end", Class: "tick"})
	}
}

// niceStep returns a round step (1, 2 or 5 times a power of ten) that cuts
// span into about n parts.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	switch norm := raw / mag; {
	case norm <= 1:
		return mag
	case norm <= 2:
		return 2 * mag
	case norm <= 5:
		return 5 * mag
	}
	return 10 * mag
}

// niceAxis returns the top of an axis from 0 that holds peak, and its
// ticks. Whole keeps the step at 1 or more, for counts.
func niceAxis(peak float64, n int, whole bool) (float64, []float64) {
	if peak <= 0 || math.IsNaN(peak) {
		peak = 1
	}
	step := niceStep(peak, n)
	if whole {
		step = math.Max(1, math.Round(step))
	}
	top := roundSig(math.Ceil(peak/step-1e-9) * step)
	var ticks []float64
	for i := 0; float64(i)*step <= top+step/2; i++ {
		ticks = append(ticks, roundSig(float64(i)*step))
	}
	return top, ticks
}

// niceRange returns round bounds around [lo, hi] and the ticks between
// them. A range that starts near 0 is drawn from 0.
func niceRange(lo, hi float64, n int) (float64, float64, []float64) {
	if hi <= lo {
		pad := math.Max(math.Abs(lo)*0.05, 1e-3)
		lo, hi = lo-pad, hi+pad
	}
	if lo > 0 && lo < (hi-lo) {
		lo = 0
	}
	step := niceStep(hi-lo, n)
	lo = math.Floor(lo/step) * step
	hi = math.Ceil(hi/step) * step
	if lo < 0 {
		lo = 0
	}
	if hi <= lo {
		hi = lo + step
	}
	var ticks []float64
	for i := 0; ; i++ {
		v := roundSig(lo + float64(i)*step)
		if v > hi+step/2 {
			break
		}
		ticks = append(ticks, v)
	}
	return lo, hi, ticks
}

// fmtTickMS labels an axis tick given in milliseconds.
func fmtTickMS(ms float64) string {
	switch {
	case ms == 0:
		return "0"
	case ms >= 60_000:
		return time.Duration(ms * float64(time.Millisecond)).Round(time.Second).String()
	case ms >= 1000:
		return strconv.FormatFloat(roundSig(ms/1000), 'f', -1, 64) + "s"
	}
	return strconv.FormatFloat(roundSig(ms), 'f', -1, 64) + "ms"
}

// roundSig rounds to 6 significant digits, hiding float noise from tick
// arithmetic (0.30000000000000004).
func roundSig(v float64) float64 {
	f, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return f
}

func fmtAxisOffset(d time.Duration) string {
	return fmtTickMS(float64(d) / float64(time.Millisecond))
}

func fmtPercent(f float64) string {
	if math.IsNaN(f) {
		return "-"
	}
	return fmt.Sprintf("%.1f%%", f*100)
}
