package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// The chart's geometry, in SVG user units (bench/compare's).
const (
	width, height          = 900, 520
	left, right, top, foot = 70, 200, 40, 50
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2", "#bcbd22", "#7f7f7f", "#000000", "#aec7e8"}

// scale is one axis: nice ends and the step between its ticks.
type scale struct{ lo, hi, tick float64 }

// chart draws loss against step, a line per run, and the legend with each
// run's final loss; k > 1 says in the legend that the curves are averaged.
func chart(w io.Writer, title string, all []series, k int) {
	minS, maxS := math.Inf(1), math.Inf(-1)
	minL, maxL := math.Inf(1), math.Inf(-1)
	for _, s := range all {
		for _, p := range s.pts {
			minS, maxS = math.Min(minS, float64(p.step)), math.Max(maxS, float64(p.step))
			if finite(p.loss) {
				minL, maxL = math.Min(minL, p.loss), math.Max(maxL, p.loss)
			}
		}
	}
	xs, ys := niceScale(minS, maxS, 5, 1), niceScale(minL, maxL, 5, 0)
	x := func(step int) float64 { return left + (float64(step)-xs.lo)/(xs.hi-xs.lo)*(width-left-right) }
	y := func(loss float64) float64 { return height - foot - (loss-ys.lo)/(ys.hi-ys.lo)*(height-top-foot) }

	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(w, `<text x="%d" y="24" font-size="16">%s</text>`+"\n", left, escape(title))
	axes(w, xs, ys, x, y)
	ly := top + 20
	if k > 1 {
		fmt.Fprintf(w, `<text x="%d" y="%d" fill="#555">mean of the last %d steps</text>`+"\n", width-right+15, ly+4, k)
		ly += 24
	}
	for i, s := range all {
		c := palette[i%len(palette)]
		line(w, s.pts, x, y, c)
		fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`, width-right+15, ly, width-right+45, ly, c)
		fmt.Fprintf(w, `<text x="%d" y="%d">%s %.3g</text>`+"\n", width-right+50, ly+4, escape(s.name), s.final())
		ly += 20
	}
	fmt.Fprintln(w, "</svg>")
}

func axes(w io.Writer, xs, ys scale, x func(int) float64, y func(float64) float64) {
	fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, height-foot, width-right, height-foot)
	fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, height-foot)
	for _, v := range xs.ticks() {
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(int(math.Round(v))), height-foot+18, xs.label(v))
	}
	fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle">step</text>`+"\n", (left+width-right)/2, height-10)
	for _, v := range ys.ticks() {
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`, left, y(v), width-right, y(v))
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y(v)+4, ys.label(v))
	}
	fmt.Fprintf(w, `<text x="18" y="%d" transform="rotate(-90 18 %d)" text-anchor="middle">loss</text>`+"\n", (top+height-foot)/2, (top+height-foot)/2)
}

// line draws one run; a loss that is not a number (a diverged run) leaves
// its step out.
func line(w io.Writer, pts []point, x func(int) float64, y func(float64) float64, color string) {
	var ps []string
	for _, p := range pts {
		if finite(p.loss) {
			ps = append(ps, fmt.Sprintf("%.1f,%.1f", x(p.step), y(p.loss)))
		}
	}
	fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", color, strings.Join(ps, " "))
}

// niceScale returns an axis from a nice floor below lo to a nice ceiling
// above hi with about n ticks, a tick apart by at least minTick.
func niceScale(lo, hi float64, n int, minTick float64) scale {
	switch {
	case lo > hi: // nothing finite to draw
		lo, hi = 0, 1
	case lo == hi:
		d := math.Max(math.Abs(lo)*0.05, 0.5)
		lo, hi = lo-d, hi+d
	}
	t := math.Max(niceCeil((hi-lo)/float64(n)), minTick)
	// The epsilon keeps a bound that is a tick already from gaining one.
	return scale{lo: math.Floor(lo/t+1e-9) * t, hi: math.Ceil(hi/t-1e-9) * t, tick: t}
}

// ticks are the scale's tick values, lo to hi.
func (s scale) ticks() []float64 {
	var vs []float64
	for i := math.Round(s.lo / s.tick); i <= math.Round(s.hi/s.tick); i++ {
		vs = append(vs, i*s.tick)
	}
	return vs
}

// label formats v with as many decimals as the tick needs.
func (s scale) label(v float64) string {
	d := 0
	for t := s.tick; t < 1-1e-9 && d < 10; t *= 10 {
		d++
	}
	return fmt.Sprintf("%.*f", d, v)
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if m*p >= v {
			return m * p
		}
	}
	return 10 * p
}

func finite(v float64) bool { return !math.IsNaN(v) && !math.IsInf(v, 0) }

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
