package main

import (
	"fmt"
	"io"
	"math"
	"strings"
)

// The chart's geometry, in SVG user units.
const (
	width, height          = 900, 520
	left, right, top, foot = 70, 200, 40, 50
)

var palette = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#e377c2"}

// chart draws bus bandwidth against size (log2 x axis): per series, gorun
// as a solid line and Open MPI as a dashed one of the same colour.
func chart(w io.Writer, title string, all []series) {
	minB, maxB, maxBW := math.Inf(1), 0.0, 0.0
	for _, s := range all {
		for _, rs := range [][]row{s.gorun, s.ompi} {
			for _, r := range rs {
				if r.bytes > 0 {
					minB, maxB = math.Min(minB, float64(r.bytes)), math.Max(maxB, float64(r.bytes))
				}
				maxBW = math.Max(maxBW, r.busbw)
			}
		}
	}
	if maxB <= minB {
		maxB = minB * 2
	}
	if maxBW == 0 {
		maxBW = 1
	}
	maxBW = niceCeil(maxBW)
	x := func(b int) float64 {
		return left + (math.Log2(float64(b))-math.Log2(minB))/(math.Log2(maxB)-math.Log2(minB))*(width-left-right)
	}
	y := func(bw float64) float64 { return height - foot - bw/maxBW*(height-top-foot) }

	fmt.Fprintf(w, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(w, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(w, `<text x="%d" y="24" font-size="16">%s</text>`+"\n", left, escape(title))
	axes(w, x, y, minB, maxB, maxBW)
	for i, s := range all {
		c := palette[i%len(palette)]
		line(w, s.gorun, x, y, c, "")
		line(w, s.ompi, x, y, c, ` stroke-dasharray="6 4"`)
		ly := top + 20 + 36*i
		fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"/>`, width-right+15, ly, width-right+45, ly, c)
		fmt.Fprintf(w, `<text x="%d" y="%d">gorun %s</text>`+"\n", width-right+50, ly+4, escape(s.label))
		fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2" stroke-dasharray="6 4"/>`, width-right+15, ly+16, width-right+45, ly+16, c)
		fmt.Fprintf(w, `<text x="%d" y="%d">Open MPI</text>`+"\n", width-right+50, ly+20)
	}
	fmt.Fprintln(w, "</svg>")
}

func axes(w io.Writer, x func(int) float64, y func(float64) float64, minB, maxB, maxBW float64) {
	fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, height-foot, width-right, height-foot)
	fmt.Fprintf(w, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>`+"\n", left, top, left, height-foot)
	for b := 1; float64(b) <= maxB; b *= 4 {
		if float64(b) < minB {
			continue
		}
		fmt.Fprintf(w, `<text x="%.1f" y="%d" text-anchor="middle">%s</text>`+"\n", x(b), height-foot+18, size(b))
	}
	fmt.Fprintf(w, `<text x="%d" y="%d" text-anchor="middle">message size (bytes)</text>`+"\n", (left+width-right)/2, height-10)
	for i := 0; i <= 4; i++ {
		bw := maxBW * float64(i) / 4
		fmt.Fprintf(w, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/>`, left, y(bw), width-right, y(bw))
		fmt.Fprintf(w, `<text x="%d" y="%.1f" text-anchor="end">%.2g</text>`+"\n", left-6, y(bw)+4, bw)
	}
	fmt.Fprintf(w, `<text x="18" y="%d" transform="rotate(-90 18 %d)" text-anchor="middle">bus bandwidth (GB/s)</text>`+"\n", (top+height-foot)/2, (top+height-foot)/2)
}

func line(w io.Writer, rs []row, x func(int) float64, y func(float64) float64, color, extra string) {
	var pts []string
	for _, r := range rs {
		if r.bytes > 0 {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(r.bytes), y(r.busbw)))
		}
	}
	fmt.Fprintf(w, `<polyline fill="none" stroke="%s" stroke-width="2"%s points="%s"/>`+"\n", color, extra, strings.Join(pts, " "))
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

func size(b int) string {
	switch {
	case b >= 1<<20:
		return fmt.Sprintf("%dM", b>>20)
	case b >= 1<<10:
		return fmt.Sprintf("%dK", b>>10)
	}
	return fmt.Sprint(b)
}

func escape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
