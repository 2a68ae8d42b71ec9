package render

import (
	"fmt"
	"math"
)

// The charts' colours: apart from the timeline's, so that a colour in a
// chart is never read as a call.
const (
	appColor        = "#81c784"
	commColor       = "#ef6c57"
	opBarColor      = "#90a4ae"
	computeColor    = "#66bb6a"
	overlappedColor = "#80deea"
	exposedColor    = "#e57373"
	idleColor       = "#e0e0e0"
)

// series is one part of a stacked bar.
type series struct {
	label, color string
}

// bar is one row of a bar chart: a value per series, and what to write
// after it.
type bar struct {
	label  string
	values []int64
	note   string
}

// barChart draws horizontal stacked bars as an inline SVG, scaled to the
// longest, with a legend above when there are several series; format
// writes a value in a bar's tooltip.
func barChart(m *markup, id, title string, ss []series, bars []bar, format func(int64) string) {
	const width, labelW, noteW = 900.0, 130.0, 170.0
	var longest int64
	for _, b := range bars {
		var t int64
		for _, v := range b.values {
			t += max(v, 0)
		}
		longest = max(longest, t)
	}
	rowH, gap := 16.0, 4.0
	if len(bars) > 40 {
		rowH, gap = math.Max(3, math.Floor(640/float64(len(bars)))), 1
	}
	labelEvery := int(math.Ceil(12 / (rowH + gap)))
	top := 24.0
	if len(ss) > 1 {
		top += 20
	}
	height := top + float64(len(bars))*(rowH+gap) + 8
	m.printf(`<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="%s" width="%s" height="%s" viewBox="0 0 %s %s" font-family="Helvetica, Arial, sans-serif" font-size="11">`+"\n",
		esc(id), num(width), num(height), num(width), num(height))
	m.raw(`<text x="0" y="14" font-weight="bold" font-size="13">`)
	m.text(title)
	m.raw("</text>\n")
	if len(ss) > 1 {
		x := 0.0
		for _, s := range ss {
			m.printf(`<rect class="swatch" x="%s" y="24" width="12" height="10" fill="%s"/><text x="%s" y="33">%s</text>`+"\n", num(x), s.color, num(x+16), esc(s.label))
			x += 16 + 6.2*float64(len([]rune(s.label))) + 18
		}
	}
	plotW := width - labelW - noteW
	for i, b := range bars {
		y := top + float64(i)*(rowH+gap)
		if i%labelEvery == 0 {
			m.printf(`<text x="%s" y="%s" text-anchor="end">%s</text>`+"\n", num(labelW-6), num(y+rowH/2+4), esc(truncate(b.label, 22)))
		}
		x := labelW
		for k, v := range b.values {
			if v <= 0 || longest == 0 || k >= len(ss) {
				continue
			}
			w := plotW * float64(v) / float64(longest)
			m.printf(`<rect class="bar" x="%s" y="%s" width="%s" height="%s" fill="%s"><title>%s</title></rect>`+"\n",
				num(x), num(y), num(w), num(rowH), ss[k].color, esc(fmt.Sprintf("%s: %s %s", b.label, ss[k].label, format(v))))
			x += w
		}
		if b.note != "" && rowH >= 9 {
			m.printf(`<text x="%s" y="%s" fill="#424242">%s</text>`+"\n", num(x+6), num(y+rowH/2+4), esc(b.note))
		}
	}
	m.raw("</svg>\n")
}
