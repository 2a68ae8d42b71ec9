package render

import (
	"fmt"
	"io"
	"math"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

// SVGOptions configures SVG.
type SVGOptions struct {
	// Width is the picture's width in pixels; 0 means 1400.
	Width int
	// Title is drawn at the top; "" means "goprof timeline" and the
	// job's directory.
	Title string
}

// The picture's geometry, in pixels.
const (
	defaultWidth = 1400
	labelWidth   = 150 // the column of rank and track names
	rightMargin  = 20
	lanesTop     = 84 // below the title, the subtitle and the time axis
	regionLayers = 6  // regions nested deeper share the sixth layer
)

// SVG draws j's timeline as a standalone SVG picture (its root element
// has id="timeline"): one lane per rank, down, with a row per track; time
// across, on a labelled axis. Calls and regions are coloured by kind (see
// the package's palette); nested regions are inset by depth, calls drawn
// over them. Waiting is drawn over the calls it happened in: the part of
// a collective call before its last member entered is hatched, a receive
// waiting for a late sender is overlaid in translucent red. Every
// rectangle's class names its kind (region, op-allreduce, send, recv,
// wait, waiting, late), and each one drawn alone has a tooltip (a title)
// with its name, duration and bytes. Events narrower than half a pixel
// are merged with their neighbours (class "merged"), so that the picture
// of a million events stays small.
func SVG(w io.Writer, j *job.Job, opt SVGOptions) error {
	m := newMarkup(w)
	newPicture(j, opt).draw(m)
	if err := m.flush(); err != nil {
		return fmt.Errorf("drawing the timeline: %w", err)
	}
	return nil
}

// picture is the timeline's layout.
type picture struct {
	j      *job.Job
	title  string
	width  float64
	height float64
	plotW  float64 // the time axis runs from labelWidth to labelWidth+plotW
	t0, t1 int64   // the times at either end of the axis
	scale  float64 // pixels per ns

	rowH, rowGap, lanePad float64
	lanes                 []lane
	lanesBottom           float64
	marks                 marks
	legend                []legendEntry
	legendTop             float64
}

// lane is one rank's band of rows, one per track.
type lane struct {
	rank   int
	r      *job.Rank // nil for a missing rank
	tracks []uint32
	top, h float64
}

func newPicture(j *job.Job, opt SVGOptions) *picture {
	p := &picture{j: j, title: opt.Title, width: defaultWidth}
	if opt.Width > 0 {
		p.width = float64(max(opt.Width, labelWidth+rightMargin+100))
	}
	if p.title == "" {
		p.title = "goprof timeline: " + j.Dir
	}
	p.plotW = p.width - labelWidth - rightMargin
	missing := map[int]bool{}
	for _, r := range j.Missing {
		missing[r] = true
	}
	rows := 0
	first := true
	for rank := range j.Size {
		var r *job.Rank
		if rank < len(j.Ranks) {
			r = j.Ranks[rank]
		}
		switch {
		case r != nil:
			l := lane{rank: rank, r: r, tracks: tracks(r)}
			p.lanes = append(p.lanes, l)
			rows += len(l.tracks)
			for i := range r.Events {
				e := &r.Events[i]
				if first || e.Start < p.t0 {
					p.t0 = e.Start
				}
				if first || e.End > p.t1 {
					p.t1 = e.End
				}
				first = false
			}
		case missing[rank]:
			p.lanes = append(p.lanes, lane{rank: rank})
			rows++
		}
	}
	if p.t1 <= p.t0 {
		p.t1 = p.t0 + 1
	}
	p.scale = p.plotW / float64(p.t1-p.t0)
	p.rowH = math.Round(min(16, max(4, 960/float64(max(rows, 1)))))
	p.rowGap, p.lanePad = 3, 4
	if p.rowH < 10 {
		p.rowGap, p.lanePad = 1, 1
	}
	y := float64(lanesTop)
	for i := range p.lanes {
		l := &p.lanes[i]
		n := float64(max(len(l.tracks), 1))
		l.top, l.h = y, 2*p.lanePad+n*p.rowH+(n-1)*p.rowGap
		y += l.h
	}
	p.lanesBottom = y
	p.marks = findMarks(j)
	p.legend = p.legendEntries()
	p.legendTop = p.lanesBottom + 22
	p.height = p.legendTop + p.layoutLegend() + 10
	return p
}

// x is where time t is drawn.
func (p *picture) x(t int64) float64 { return labelWidth + float64(t-p.t0)*p.scale }

// rowTop is the top of row i of l.
func (p *picture) rowTop(l *lane, i int) float64 {
	return l.top + p.lanePad + float64(i)*(p.rowH+p.rowGap)
}

func (p *picture) draw(m *markup) {
	m.printf(`<svg xmlns="http://www.w3.org/2000/svg" id="timeline" class="goprof-timeline" width="%s" height="%s" viewBox="0 0 %s %s" font-family="Helvetica, Arial, sans-serif" font-size="11">`+"\n",
		num(p.width), num(p.height), num(p.width), num(p.height))
	m.raw(`<defs>
<pattern id="tl-hatch" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)"><rect class="hatch" width="3" height="6" fill="#ffffff" fill-opacity="0.6"/></pattern>
<pattern id="tl-missing" patternUnits="userSpaceOnUse" width="8" height="8" patternTransform="rotate(45)"><rect class="hatch" width="4" height="8" fill="` + missingColor + `"/></pattern>
</defs>
`)
	m.printf(`<rect class="background" width="%s" height="%s" fill="#ffffff"/>`+"\n", num(p.width), num(p.height))
	m.raw(`<text class="title" x="8" y="24" font-size="16" font-weight="bold">`)
	m.text(p.title)
	m.raw("</text>\n")
	p.subtitle(m)
	p.backgrounds(m)
	p.axis(m)
	m.raw("<g id=\"tl-lanes\">\n")
	for i := range p.lanes {
		p.lane(m, &p.lanes[i])
	}
	m.raw("</g>\n")
	p.drawLegend(m)
	m.raw("</svg>\n")
}

// subtitle says what the job was: ranks, time, events, and what is
// missing.
func (p *picture) subtitle(m *markup) {
	events := 0
	for _, r := range p.j.Present() {
		events += len(r.Events)
	}
	s := fmt.Sprintf("%d ranks · %s · %d events", p.j.Size, dur(p.j.Duration), events)
	if p.j.ID != "" {
		s += " · job " + p.j.ID
	}
	if p.j.Program != "" {
		s += " · " + p.j.Program
	}
	m.raw(`<text class="subtitle" x="8" y="44" font-size="12" fill="#555555">`)
	m.text(s)
	if len(p.j.Missing) > 0 {
		m.raw(` · <tspan class="problem" fill="` + lateColor + `" font-weight="bold">`)
		m.text("no trace of rank " + job.Ranges(p.j.Missing))
		m.raw(`</tspan>`)
	}
	m.raw("</text>\n")
}

// backgrounds shades every other lane.
func (p *picture) backgrounds(m *markup) {
	m.raw("<g id=\"tl-lane-backgrounds\">\n")
	for i, l := range p.lanes {
		fill := "#f7f7f7"
		if i%2 == 1 {
			fill = "#eeeeee"
		}
		m.printf(`<rect class="lane-bg" x="0" y="%s" width="%s" height="%s" fill="%s"/>`+"\n", num(l.top), num(p.width), num(l.h), fill)
	}
	m.raw("</g>\n")
}

// axis draws the time axis above the lanes and its grid through them.
func (p *picture) axis(m *markup) {
	step := tickStep(p.t1-p.t0, max(int(p.plotW/110), 2))
	unit, per := timeUnit(step)
	top := float64(lanesTop)
	m.raw("<g id=\"tl-axis\" class=\"axis\">\n")
	m.printf(`<text x="8" y="%s" fill="#555555">time</text>`+"\n", num(top-10))
	m.printf(`<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="#9e9e9e"/>`+"\n", num(labelWidth), num(top-3), num(labelWidth+p.plotW), num(top-3))
	for _, t := range ticks(p.t0, p.t1, step) {
		x := num(p.x(t))
		m.printf(`<line class="grid" x1="%s" y1="%s" x2="%s" y2="%s" stroke="#d6d6d6"/>`+"\n", x, num(top-7), x, num(p.lanesBottom))
		m.printf(`<text class="tick" x="%s" y="%s" text-anchor="middle" fill="#555555">%s</text>`+"\n", x, num(top-10), esc(tickLabel(t, unit, per)))
	}
	m.raw("</g>\n")
}

// lane draws one rank: its labels, its events and the waits over them.
func (p *picture) lane(m *markup, l *lane) {
	class := "lane"
	if l.r == nil {
		class += " missing"
	}
	m.printf(`<g class="%s" id="tl-rank-%d">`+"\n", class, l.rank)
	p.labels(m, l)
	if l.r == nil {
		m.printf(`<rect class="missing" x="%s" y="%s" width="%s" height="%s" fill="url(#tl-missing)"><title>rank %d: no trace file</title></rect>`+"\n",
			num(labelWidth), num(p.rowTop(l, 0)), num(p.plotW), num(p.rowH), l.rank)
		if p.rowH >= 10 {
			m.printf(`<text x="%s" y="%s" font-style="italic" fill="#424242">no trace of rank %d</text>`+"\n", num(labelWidth+8), num(p.rowTop(l, 0)+p.rowH/2+4), l.rank)
		}
	} else {
		p.events(m, l)
	}
	m.raw("</g>\n")
}

// labels writes "rank N" and its host, and the names of its tracks when
// it has several, as far as the lane's height allows.
func (p *picture) labels(m *markup, l *lane) {
	host := ""
	if l.r != nil {
		host = l.r.Host
	}
	switch {
	case l.h >= 28 && host != "":
		m.printf(`<text class="rank-label" x="8" y="%s" font-weight="bold" font-size="12">rank %d</text>`+"\n", num(l.top+15), l.rank)
		m.printf(`<text class="host-label" x="8" y="%s" font-size="10" fill="#616161">%s</text>`+"\n", num(l.top+27), esc(truncate(host, 14)))
	case l.h >= 11:
		label := fmt.Sprintf("rank %d", l.rank)
		if host != "" {
			label += " (" + truncate(host, 10) + ")"
		}
		m.printf(`<text class="rank-label" x="8" y="%s" font-weight="bold" font-size="%s">%s</text>`+"\n", num(l.top+min(l.h, 16)/2+4), num(min(11, l.h-1)), esc(label))
	case l.rank%int(math.Ceil(11/l.h)) == 0:
		m.printf(`<text class="rank-label" x="8" y="%s" font-size="10">rank %d</text>`+"\n", num(l.top+l.h), l.rank)
	}
	if len(l.tracks) < 2 || p.rowH < 9 {
		return
	}
	for i, t := range l.tracks {
		m.printf(`<text class="track-label" x="%s" y="%s" text-anchor="end" font-size="9" fill="#757575">%s</text>`+"\n",
			num(labelWidth-4), num(p.rowTop(l, i)+p.rowH/2+3), esc(truncate(trackName(p.j, t), 14)))
	}
}

// events draws l's events, row by row and layer by layer: regions by
// depth, then calls and the waits over them.
func (p *picture) events(m *markup, l *lane) {
	rowOf := map[uint32]int{}
	for i, t := range l.tracks {
		rowOf[t] = i
	}
	layers := make([][regionLayers + 1]*layer, len(l.tracks))
	nest := make([]nester, len(l.tracks))
	get := func(row, k int) *layer {
		if layers[row][k] == nil {
			y, h := p.rowTop(l, row), p.rowH
			if k < regionLayers {
				inset := float64(k) * math.Floor(p.rowH/8)
				y, h = y+inset, h-inset
			}
			layers[row][k] = &layer{y: y, h: h, scale: p.scale}
		}
		return layers[row][k]
	}
	evs := l.r.Events
	for _, i := range order(evs) {
		e := &evs[i]
		if e.Kind == trace.MemoryEvent {
			continue
		}
		row := rowOf[e.Track]
		depth, k := 0, regionLayers
		if e.Kind == trace.RegionEvent {
			depth = nest[row].depth(e.Start, e.End)
			k = min(depth, regionLayers-1)
		}
		st := styleOf(p.j, e, depth)
		ly := get(row, k)
		x0, x1 := p.x(e.Start), p.x(e.End)
		if x1-x0 < minPx {
			ly.narrow(x0, x1, st, e.Dur())
			continue
		}
		ly.flush()
		class := st.class
		if e.Kind == trace.RegionEvent {
			class += fmt.Sprintf(" depth-%d", depth)
		}
		ly.out = appendTitled(ly.out, class, x0, ly.y, x1-x0, ly.h, st.color, "", p.tooltip(l.rank, e, st))
		p.waits(ly, job.Ref{Rank: l.rank, Index: int(i)}, e, x0)
	}
	for row := range layers {
		for _, ly := range layers[row] {
			if ly != nil {
				ly.flush()
				m.bytes(ly.out)
			}
		}
	}
}

// waits draws, over a call drawn from x0, the time it waited for the
// last member of its collective or for a late sender.
func (p *picture) waits(ly *layer, ref job.Ref, e *trace.Event, x0 float64) {
	if cw, ok := p.marks.wait[ref]; ok {
		if w := p.x(cw.until) - x0; w >= minPx {
			title := fmt.Sprintf("waited %s for rank %d to enter", dur(cw.until-e.Start), cw.last)
			ly.out = appendTitled(ly.out, "waiting", x0, ly.y, w, ly.h, "url(#tl-hatch)", "", title)
		}
	}
	if lw, ok := p.marks.late[ref]; ok {
		if w := p.x(e.Start+lw.lost) - x0; w >= minPx {
			title := fmt.Sprintf("late sender: waited %s for rank %d to send", dur(lw.lost), lw.sender)
			ly.out = appendTitled(ly.out, "late", x0, ly.y, w, ly.h, lateColor, ` fill-opacity="0.55"`, title)
		}
	}
}

// tooltip is a drawn event's title: what, how long, how many bytes.
func (p *picture) tooltip(rank int, e *trace.Event, st style) string {
	s := st.name + ": " + dur(e.Dur())
	switch e.Kind {
	case trace.RegionEvent:
	case trace.CollectiveEvent:
		s += ", " + size(e.Bytes)
		if a := p.j.Str(e.Algo); a != "" {
			s += " (" + a + ")"
		}
	case trace.SendEvent:
		s += fmt.Sprintf(", %s to rank %d, tag %d", size(e.Bytes), e.Peer, e.Tag)
	default:
		s += fmt.Sprintf(", %s from rank %d, tag %d", size(e.Bytes), e.Peer, e.Tag)
	}
	s += fmt.Sprintf("; rank %d at %s", rank, dur(e.Start))
	if e.Flags&trace.Failed != 0 {
		s += "; failed"
	}
	return s
}
