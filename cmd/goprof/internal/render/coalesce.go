package render

import "math"

// minPx is the narrowest rectangle the picture draws alone: narrower
// events are merged with their neighbours.
const minPx = 0.5

// layer collects the rectangles of one row of one lane at one height (a
// region depth, or the calls), given left to right by start. Events at
// least minPx wide are drawn as they are, with a tooltip; narrower ones
// whose starts fall in the same pixel column are merged into one
// rectangle of the kind that took most of their time, as tall as the
// share of the column's time they took (in eighths, bottom-aligned), and
// adjacent merged rectangles of one kind and height into one. A million
// events so give at most a few rectangles per pixel column, and a column
// where calls took a fifth of the time shows a fifth of its height in
// their colour, not all of it.
type layer struct {
	y, h  float64
	scale float64 // pixels per ns
	out   []byte

	// the group of narrow events starting in pixel column col
	grouping bool
	col      float64
	gx0, gx1 float64
	busy     int64 // the group's events' time
	weights  []weight

	// the merged rectangle held back to be extended
	holding  bool
	hx0, hx1 float64
	hq       float64 // its height, as a share of h
	hs       style
}

// weight is the time events of one style took in a group.
type weight struct {
	st style
	ns int64
}

// narrow adds an event narrower than minPx, from x0 to x1, of ns.
func (l *layer) narrow(x0, x1 float64, st style, ns int64) {
	col := math.Floor(x0)
	if !l.grouping || col != l.col {
		l.flushGroup()
		l.grouping, l.col, l.gx0, l.gx1 = true, col, x0, x1
	}
	l.gx1 = max(l.gx1, x1)
	l.busy += ns
	ns++ // an instant counts too
	for i := range l.weights {
		if l.weights[i].st == st {
			l.weights[i].ns += ns
			return
		}
	}
	l.weights = append(l.weights, weight{st, ns})
}

// flushGroup turns the group into a merged rectangle, held back.
func (l *layer) flushGroup() {
	if !l.grouping {
		return
	}
	l.grouping = false
	best := l.weights[0]
	for _, w := range l.weights[1:] {
		if w.ns > best.ns {
			best = w
		}
	}
	l.weights = l.weights[:0]
	x0, x1 := l.gx0, max(l.gx1, l.gx0+minPx)
	share := min(float64(l.busy)*l.scale/(x1-x0), 1)
	l.busy = 0
	q := max(math.Ceil(share*8-1e-9), 1) / 8
	if l.holding && l.hs == best.st && l.hq == q && x0 <= l.hx1+1 {
		l.hx1 = max(l.hx1, x1)
		return
	}
	l.flushHeld()
	l.holding, l.hx0, l.hx1, l.hq, l.hs = true, x0, x1, q, best.st
}

// flushHeld draws the held merged rectangle.
func (l *layer) flushHeld() {
	if !l.holding {
		return
	}
	l.holding = false
	h := l.h * l.hq
	l.out = appendRect(l.out, l.hs.class+" merged", l.hx0, l.y+l.h-h, l.hx1-l.hx0, h, l.hs.color)
	l.out = append(l.out, "/>\n"...)
}

// flush draws what is pending, so that a wide rectangle can follow.
func (l *layer) flush() {
	l.flushGroup()
	l.flushHeld()
}

// appendRect appends an unclosed rect element.
func appendRect(b []byte, class string, x, y, w, h float64, fill string) []byte {
	b = append(b, `<rect class="`...)
	b = append(b, class...)
	b = append(b, `" x="`...)
	b = appendNum(b, x)
	b = append(b, `" y="`...)
	b = appendNum(b, y)
	b = append(b, `" width="`...)
	b = appendNum(b, w)
	b = append(b, `" height="`...)
	b = appendNum(b, h)
	b = append(b, `" fill="`...)
	b = append(b, fill...)
	b = append(b, '"')
	return b
}

// appendTitled appends a rect element with a tooltip.
func appendTitled(b []byte, class string, x, y, w, h float64, fill, extra, title string) []byte {
	b = appendRect(b, class, x, y, w, h, fill)
	b = append(b, extra...)
	b = append(b, "><title>"...)
	b = append(b, esc(title)...)
	b = append(b, "</title></rect>\n"...)
	return b
}
