package render

import (
	"bytes"
	"encoding/xml"
	"io"
	"math"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

// svgRect is a rect of the picture: its class, fill, the lane it is in,
// and its tooltip.
type svgRect struct {
	class, fill, lane, title string
}

// svgDoc is what parseSVG found.
type svgDoc struct {
	rootID string
	lanes  []string // the lanes' ids, in order
	rects  []svgRect
}

// parseSVG walks every token of b as XML and collects the lanes and
// rects.
func parseSVG(t *testing.T, b []byte) svgDoc {
	t.Helper()
	var doc svgDoc
	d := xml.NewDecoder(bytes.NewReader(b))
	var stack []xml.StartElement
	var lane string
	var inTitle *svgRect
	var title strings.Builder
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("the SVG is not XML: %v", err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			attr := func(name string) string {
				for _, a := range tok.Attr {
					if a.Name.Local == name {
						return a.Value
					}
				}
				return ""
			}
			switch tok.Name.Local {
			case "svg":
				if len(stack) == 0 {
					doc.rootID = attr("id")
				}
			case "g":
				if strings.HasPrefix(attr("class"), "lane") {
					lane = attr("id")
					doc.lanes = append(doc.lanes, lane)
				}
			case "rect":
				doc.rects = append(doc.rects, svgRect{class: attr("class"), fill: attr("fill"), lane: lane})
			case "title":
				if len(stack) > 0 && stack[len(stack)-1].Name.Local == "rect" {
					inTitle = &doc.rects[len(doc.rects)-1]
					title.Reset()
				}
			}
			stack = append(stack, tok)
		case xml.CharData:
			if inTitle != nil {
				title.Write(tok)
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
			switch tok.Name.Local {
			case "title":
				if inTitle != nil {
					inTitle.title = title.String()
					inTitle = nil
				}
			case "g":
				if len(stack) > 0 && stack[len(stack)-1].Name.Local == "g" {
					break
				}
				lane = ""
			}
		}
	}
	return doc
}

// kind is the first word of a class.
func kind(class string) string {
	f := strings.Fields(class)
	if len(f) == 0 {
		return ""
	}
	return f[0]
}

func TestSVG(t *testing.T) {
	j := smallJob(t, 4)
	var buf bytes.Buffer
	if err := SVG(&buf, j, SVGOptions{Title: "small <job> & co"}); err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, buf.Bytes())
	if doc.rootID != "timeline" {
		t.Errorf("root id %q, want timeline", doc.rootID)
	}
	if want := []string{"tl-rank-0", "tl-rank-1", "tl-rank-2", "tl-rank-3"}; strings.Join(doc.lanes, " ") != strings.Join(want, " ") {
		t.Errorf("lanes %v, want %v", doc.lanes, want)
	}
	if !strings.Contains(buf.String(), "small &lt;job&gt; &amp; co") {
		t.Error("the title is not escaped")
	}

	// A rect with a tooltip per event, of its kind, in its rank's lane.
	want := map[string]int{}
	for _, r := range j.Present() {
		for _, e := range r.Events {
			k := ""
			switch e.Kind {
			case trace.RegionEvent:
				k = "region"
			case trace.CollectiveEvent:
				k = "op-" + j.Str(e.Name)
			case trace.SendEvent, trace.RecvEvent, trace.WaitEvent:
				k = e.Kind.String()
			default:
				continue
			}
			want[laneID(r.Rank)+" "+k]++
		}
	}
	got := map[string]int{}
	waiting, late := 0, 0
	for _, r := range doc.rects {
		switch kind(r.class) {
		case "waiting":
			waiting++
			if r.title == "" || r.lane == "" {
				t.Errorf("waiting rect %+v: want a tooltip, in a lane", r)
			}
		case "late":
			late++
			if !strings.Contains(r.title, "rank 2") || r.lane != "tl-rank-3" {
				t.Errorf("late rect %+v: want rank 3 waiting for rank 2", r)
			}
		}
		if r.lane == "" || r.title == "" {
			continue
		}
		got[r.lane+" "+kind(r.class)]++
		if kind(r.class) == "op-allreduce" && r.fill != opColors["allreduce"] {
			t.Errorf("allreduce filled %s, want %s", r.fill, opColors["allreduce"])
		}
		if strings.Contains(r.class, "merged") {
			t.Errorf("a small job has merged rects: %+v", r)
		}
	}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s: %d rects, want %d", k, got[k], n)
		}
	}
	if got["tl-rank-0 op-allreduce"] != 2 || got["tl-rank-1 wait"] != 1 || got["tl-rank-0 region"] != 3 {
		t.Errorf("rects by lane and kind: %v", got)
	}
	// Ranks 0 to 2 wait for rank 3 in the allreduce, all but the last in
	// the barrier.
	if waiting != 3+3 {
		t.Errorf("%d waiting rects, want 6", waiting)
	}
	if late != 1 {
		t.Errorf("%d late rects, want 1", late)
	}
	for _, s := range []string{`class="tick"`, ">0<", "rank 3", "h1", "allreduce: ", "4KiB", "legend"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("the SVG lacks %q", s)
		}
	}
}

// laneID is the id of rank's lane.
func laneID(rank int) string { return "tl-rank-" + itoa(rank) }

func TestSVGMissingRank(t *testing.T) {
	j := smallJob(t, 4, 2)
	var buf bytes.Buffer
	if err := SVG(&buf, j, SVGOptions{Width: 800}); err != nil {
		t.Fatal(err)
	}
	doc := parseSVG(t, buf.Bytes())
	if len(doc.lanes) != 4 {
		t.Errorf("lanes %v, want 4", doc.lanes)
	}
	missing := false
	for _, r := range doc.rects {
		if r.lane == "tl-rank-2" && kind(r.class) == "missing" {
			missing = true
		}
		if r.lane == "tl-rank-2" && kind(r.class) != "missing" {
			t.Errorf("the missing rank's lane has %+v", r)
		}
	}
	if !missing || !strings.Contains(buf.String(), "no trace of rank 2") {
		t.Error("the missing rank is not shown")
	}
	if !strings.Contains(buf.String(), `width="800"`) {
		t.Error("the width is not 800")
	}
}

func TestTicks(t *testing.T) {
	for _, c := range []struct {
		span  int64
		n     int
		step  int64
		label string // of the second tick
	}{
		{1_000_000, 10, 100_000, "100µs"},
		{123_456, 8, 20_000, "20µs"},
		{99_000, 11, 10_000, "10µs"},
		{3_000_000_000, 12, 500_000_000, "500ms"},
		{40, 4, 10, "10ns"},
		{7_200_000_000_000, 10, 1_000_000_000_000, "1000s"},
	} {
		step := tickStep(c.span, c.n)
		unit, per := timeUnit(step)
		ts := ticks(0, c.span, step)
		if step != c.step || len(ts) < 2 || tickLabel(ts[1], unit, per) != c.label || tickLabel(0, unit, per) != "0" {
			t.Errorf("span %d, %d ticks: step %d, ticks %v (%s), want step %d, second %s", c.span, c.n, step, ts, unit, c.step, c.label)
		}
	}
	if got := tickLabel(1_500_000, "ms", 1e6); got != "1.5ms" {
		t.Errorf("tickLabel 1.5ms = %q", got)
	}
}

func TestLayerMerges(t *testing.T) {
	l := &layer{y: 10, h: 16, scale: 0.01} // 100 ns a pixel
	a := style{"op-allreduce", "#1f5fbf", "allreduce"}
	s := style{"send", sendColor, "send"}
	add := func(x0, x1 float64, st style) { l.narrow(x0, x1, st, int64(math.Round((x1-x0)/l.scale))) }
	// Pixels 100 and 101: allreduces nearly all the time, one rect.
	add(100.0, 100.4, a)
	add(100.45, 100.9, a)
	add(101.0, 101.45, a)
	add(101.5, 101.95, a)
	// Pixel 103: a send alone, a fifth of half a pixel: a quarter high.
	add(103.2, 103.3, s)
	// Pixel 105: mostly send, busy 0.4 of 0.5 pixel: seven eighths.
	add(105.0, 105.1, a)
	add(105.2, 105.5, s)
	l.flush()
	out := string(l.out)
	for _, want := range []string{
		`<rect class="op-allreduce merged" x="100" y="10" width="1.95" height="16" fill="#1f5fbf"/>`,
		`<rect class="send merged" x="103.2" y="22" width="0.5" height="4" fill="#29b6f6"/>`,
		`<rect class="send merged" x="105" y="12" width="0.5" height="14" fill="#29b6f6"/>`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("no %s in\n%s", want, out)
		}
	}
	if n := strings.Count(out, "<rect"); n != 3 {
		t.Errorf("%d rects, want 3:\n%s", n, out)
	}
}

func TestFormat(t *testing.T) {
	for ns, want := range map[int64]string{0: "0ns", 812: "812ns", 1000: "1µs", 12_345: "12.3µs", 999_499: "999µs", 999_960: "1ms",
		4_560_000: "4.56ms", 999_960_000: "1s", 7_890_000_000: "7.89s", 12_345_000_000_000: "12345s", -1500: "-1.5µs"} {
		if got := dur(ns); got != want {
			t.Errorf("dur(%d) = %q, want %q", ns, got, want)
		}
	}
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1024: "1KiB", 1536: "1.5KiB", 1<<20 - 1: "1MiB", 3 << 20: "3MiB", 1 << 40: "1TiB"} {
		if got := size(n); got != want {
			t.Errorf("size(%d) = %q, want %q", n, got, want)
		}
	}
}
