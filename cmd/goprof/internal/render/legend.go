package render

import (
	"slices"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

// legendEntry is one kind in the legend.
type legendEntry struct {
	class  string
	colors []string // swatches side by side
	hatch  bool     // the waiting hatch over the swatch
	alpha  string   // the swatch's fill-opacity, when not opaque
	label  string
	x, y   float64
}

// legendEntries lists the kinds the picture shows.
func (p *picture) legendEntries() []legendEntry {
	ops := map[string]bool{}
	var regions, send, recv, wait bool
	for _, r := range p.j.Present() {
		for i := range r.Events {
			e := &r.Events[i]
			switch e.Kind {
			case trace.RegionEvent:
				regions = true
			case trace.CollectiveEvent:
				ops[p.j.Str(e.Name)] = true
			case trace.SendEvent:
				send = true
			case trace.RecvEvent:
				recv = true
			case trace.WaitEvent:
				wait = true
			}
		}
	}
	var es []legendEntry
	if regions {
		es = append(es, legendEntry{class: "region", colors: regionColors[:], label: "compute (regions; darker: outer)"})
	}
	known := []string{"broadcast", "reduce", "allreduce", "gather", "scatter", "allgather", "reducescatter", "alltoall", "barrier"}
	var other []string
	for op := range ops {
		if !slices.Contains(known, op) {
			other = append(other, op)
		}
	}
	slices.Sort(other)
	for _, op := range append(known, other...) {
		if ops[op] {
			label := op
			if label == "" {
				label = "collective"
			}
			es = append(es, legendEntry{class: "op-" + classSafe(op), colors: []string{opColor(op)}, label: label})
		}
	}
	if send {
		es = append(es, legendEntry{class: "send", colors: []string{sendColor}, label: "send"})
	}
	if recv {
		es = append(es, legendEntry{class: "recv", colors: []string{recvColor}, label: "recv"})
	}
	if wait {
		es = append(es, legendEntry{class: "wait", colors: []string{waitColor}, label: "wait (non-blocking)"})
	}
	var waiting, late bool // drawn anywhere: at least minPx wide
	for ref, cw := range p.marks.wait {
		waiting = waiting || float64(cw.until-p.j.Event(ref).Start)*p.scale >= minPx
	}
	for _, lw := range p.marks.late {
		late = late || float64(lw.lost)*p.scale >= minPx
	}
	if waiting {
		es = append(es, legendEntry{class: "waiting", colors: []string{"#78909c"}, hatch: true, label: "waiting for the last rank to enter"})
	}
	if late {
		es = append(es, legendEntry{class: "late", colors: []string{lateColor}, alpha: "0.55", label: "waiting for a late sender"})
	}
	if len(p.j.Missing) > 0 {
		es = append(es, legendEntry{class: "missing", colors: []string{missingColor}, label: "no trace"})
	}
	return es
}

// layoutLegend places the entries in rows and returns their height.
func (p *picture) layoutLegend() float64 {
	if len(p.legend) == 0 {
		return 0
	}
	const rowH, swatchW = 20, 12
	x, y := 8.0, 0.0
	for i := range p.legend {
		e := &p.legend[i]
		w := float64(len(e.colors)*swatchW) + 6 + 6.2*float64(len([]rune(e.label))) + 18
		if x > 8 && x+w > p.width-8 {
			x, y = 8, y+rowH
		}
		e.x, e.y = x, y
		x += w
	}
	return y + rowH
}

func (p *picture) drawLegend(m *markup) {
	if len(p.legend) == 0 {
		return
	}
	const swatchW = 12
	m.raw("<g id=\"tl-legend\" class=\"legend\">\n")
	for _, e := range p.legend {
		y := p.legendTop + e.y
		for k, c := range e.colors {
			extra := ""
			if e.alpha != "" {
				extra = ` fill-opacity="` + e.alpha + `"`
			}
			m.printf(`<rect class="swatch %s" x="%s" y="%s" width="%d" height="10" fill="%s"%s/>`+"\n", e.class, num(e.x+float64(k*swatchW)), num(y), swatchW, c, extra)
		}
		if e.hatch {
			m.printf(`<rect class="swatch %s" x="%s" y="%s" width="%d" height="10" fill="url(#tl-hatch)"/>`+"\n", e.class, num(e.x), num(y), swatchW)
		}
		m.printf(`<text x="%s" y="%s">%s</text>`+"\n", num(e.x+float64(len(e.colors)*swatchW)+6), num(y+9), esc(e.label))
	}
	m.raw("</g>\n")
}
