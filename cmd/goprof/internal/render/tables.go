package render

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/report"
)

// column is a table's column: its header, and whether it is text (left
// aligned) rather than a number.
type column struct {
	name string
	text bool
}

// table writes an HTML table; with no rows, a line saying there is none.
func table(m *markup, class string, cols []column, rows [][]string, none string) {
	if len(rows) == 0 {
		m.raw(`<p class="note">`)
		m.text(none)
		m.raw("</p>\n")
		return
	}
	m.printf(`<table class="%s"><thead><tr>`, esc(class))
	for _, c := range cols {
		if c.text {
			m.raw(`<th class="l">`)
		} else {
			m.raw("<th>")
		}
		m.text(c.name)
		m.raw("</th>")
	}
	m.raw("</tr></thead>\n<tbody>\n")
	for _, row := range rows {
		m.raw("<tr>")
		for i, cell := range row {
			if i < len(cols) && cols[i].text {
				m.raw(`<td class="l">`)
			} else {
				m.raw("<td>")
			}
			m.text(cell)
			m.raw("</td>")
		}
		m.raw("</tr>\n")
	}
	m.raw("</tbody></table>\n")
}

// section opens a section with a heading; end closes it.
func section(m *markup, id, title string) {
	m.printf(`<section id="%s">`+"\n<h2>", esc(id))
	m.text(title)
	m.raw("</h2>\n")
}

func end(m *markup) { m.raw("</section>\n") }

// note writes a paragraph of explanation.
func note(m *markup, s string) {
	m.raw(`<p class="note">`)
	m.text(s)
	m.raw("</p>\n")
}

func pct(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" }

func itoa(n int) string { return strconv.Itoa(n) }

// gbs formats a bandwidth in GB/s.
func gbs(f float64) string { return strconv.FormatFloat(f, 'g', 3, 64) }

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func ranksTable(m *markup, r *report.Report) {
	section(m, "ranks", "Time per rank")
	offset := "clock offset"
	text := "wall: the rank's first event to its last; comm: inside blocking communication calls; app: the rest; async: non-blocking collectives in flight, which may overlap app."
	if r.OneHost() {
		offset = "started"
		text += " One host, one clock: started is how long after rank 0 the rank began tracing (its clock offset), not clock skew."
	}
	note(m, text)
	cols := []column{{"rank", false}, {"host", true}, {"wall", false}, {"app", false}, {"comm", false}, {"comm %", false}, {"async", false}, {"heap peak", false}, {"events", false}, {offset, false}, {"clock rtt", false}, {"complete", true}}
	var rows [][]string
	for _, s := range r.Ranks {
		rows = append(rows, []string{itoa(s.Rank), s.Host, dur(s.Wall), dur(s.App), dur(s.Comm), pct(s.CommShare), dur(s.Async),
			size(s.HeapPeak), itoa(s.Events), dur(s.Offset), dur(s.RTT), yes(s.Complete)})
	}
	table(m, "ranks", cols, rows, "No rank has a trace.")
	end(m)
}

// sizes writes a histogram of call sizes as "≤8B:12 ≤1MiB:3".
func sizes(bs []report.Bucket) string {
	var parts []string
	for _, b := range bs {
		parts = append(parts, fmt.Sprintf("≤%s:%d", size(b.Upto), b.Count))
	}
	return strings.Join(parts, " ")
}

func opsTable(m *markup, r *report.Report) {
	section(m, "operations", "Operations")
	note(m, "All ranks' calls of each operation; comm %: of all ranks' time in blocking communication.")
	cols := []column{{"op", true}, {"calls", false}, {"total", false}, {"mean", false}, {"max", false}, {"bytes", false}, {"comm %", false}, {"sizes", true}}
	var rows [][]string
	for _, s := range r.Ops {
		rows = append(rows, []string{s.Op, itoa(s.Count), dur(s.Total), dur(s.Mean), dur(s.Max), size(s.Bytes), sharePct(s.Share), sizes(s.Sizes)})
	}
	table(m, "ops", cols, rows, "No communication was recorded.")
	end(m)
}

func sharePct(f float64) string {
	if f <= 0 {
		return ""
	}
	return pct(f)
}

func sitesTable(m *markup, r *report.Report) {
	const limit = 20
	section(m, "sites", "Call sites")
	sites := r.Sites
	if len(sites) > limit {
		note(m, fmt.Sprintf("The %d call sites that took the most time, of %d.", limit, len(sites)))
		sites = sites[:limit]
	}
	cols := []column{{"site", true}, {"op", true}, {"calls", false}, {"total", false}, {"mean", false}, {"max", false}, {"bytes", false}, {"comm %", false}}
	var rows [][]string
	for _, s := range sites {
		rows = append(rows, []string{s.Site, s.Op, itoa(s.Count), dur(s.Total), dur(s.Mean), dur(s.Max), size(s.Bytes), sharePct(s.Share)})
	}
	table(m, "sites", cols, rows, "No call site was recorded.")
	end(m)
}

func regionsTable(m *markup, r *report.Report) {
	section(m, "regions", "Regions")
	note(m, "All ranks' regions of each name; cv: the coefficient of variation of the ranks' totals.")
	cols := []column{{"region", true}, {"count", false}, {"total", false}, {"mean", false}, {"max", false}, {"cv", false}}
	var rows [][]string
	for _, s := range r.Regions {
		rows = append(rows, []string{s.Name, itoa(s.Count), dur(s.Total), dur(s.Mean), dur(s.Max), strconv.FormatFloat(s.CV, 'f', 2, 64)})
	}
	table(m, "regions", cols, rows, "The program marked no regions.")
	end(m)
}

func lateSendersTable(m *markup, r *report.Report) {
	ls := r.LateSender
	section(m, "late-senders", "Late senders")
	note(m, fmt.Sprintf("Receives waited %s in all, in %d receives, for messages not yet sent.", dur(ls.Total), ls.Count))
	cols := []column{{"receiver", false}, {"waited for sender", false}, {"times", false}, {"total", false}, {"longest", false}}
	var rows [][]string
	for _, p := range ls.Pairs {
		rows = append(rows, []string{itoa(p.Receiver), itoa(p.Sender), itoa(p.Count), dur(p.Total), dur(p.Max)})
	}
	table(m, "late-senders", cols, rows, "No receive waited for a late sender.")
	end(m)
}

func collectiveWaitsTable(m *markup, r *report.Report) {
	cw := r.CollWait
	section(m, "collective-waits", "Waits at collectives")
	note(m, fmt.Sprintf("Ranks waited %s in all inside %d collective calls that every member recorded, for the last member to enter.", dur(cw.Total), cw.Instances))
	var rows [][]string
	for _, w := range cw.PerRank {
		rows = append(rows, []string{itoa(w.Rank), dur(w.Wait)})
	}
	table(m, "collective-waits", []column{{"rank", false}, {"waited", false}}, rows, "No collective call was recorded by all its members.")
	if len(cw.Worst) > 0 {
		m.raw("<h3>The calls whose members entered furthest apart</h3>\n")
		rows = nil
		for _, s := range cw.Worst {
			rows = append(rows, []string{s.Op, strconv.FormatUint(uint64(s.Comm), 10), strconv.FormatUint(s.Seq, 10), dur(s.At), dur(s.Spread), itoa(s.Last)})
		}
		table(m, "worst-entries", []column{{"op", true}, {"comm", false}, {"call", false}, {"at", false}, {"entries apart", false}, {"last rank", false}}, rows, "")
	}
	end(m)
}

func stragglersTable(m *markup, r *report.Report) {
	section(m, "stragglers", "Stragglers")
	note(m, "The ranks that entered collectives last, and the time the others waited for them.")
	var rows [][]string
	for _, s := range r.Stragglers {
		rows = append(rows, []string{itoa(s.Rank), itoa(s.Last), pct(s.Share), dur(s.Delay)})
	}
	table(m, "stragglers", []column{{"rank", false}, {"times last", false}, {"of its calls", false}, {"cost", false}}, rows, "No rank was last into a collective.")
	end(m)
}

func popTable(m *markup, r *report.Report) {
	im, p := r.Imbalance, r.POP
	section(m, "efficiency", "Load balance and POP efficiencies")
	rows := [][]string{
		{"parallel efficiency", pct(p.ParallelEfficiency), "load balance × communication efficiency"},
		{"load balance", pct(p.LoadBalance), "mean app time / max app time"},
		{"communication efficiency", pct(p.CommEfficiency), "max app time / max wall time"},
		{"app time", fmt.Sprintf("mean %s, max %s", dur(im.MeanApp), dur(im.MaxApp)), fmt.Sprintf("most loaded: rank %d", im.MostLoaded)},
		{"app time cv", strconv.FormatFloat(im.AppCV, 'f', 3, 64), "coefficient of variation over ranks"},
		{"comm time cv", strconv.FormatFloat(im.CommCV, 'f', 3, 64), "coefficient of variation over ranks"},
	}
	table(m, "efficiency", []column{{"measure", true}, {"value", false}, {"what", true}}, rows, "")
	end(m)
}

func bandwidthTable(m *markup, r *report.Report) {
	section(m, "bandwidth", "Collective bandwidth, achieved and modelled")
	note(m, "time: from the last member's entry to the last exit, mean over calls; bandwidths in GB/s; model: topo's prediction.")
	cols := []column{{"op", true}, {"algo", true}, {"ranks", false}, {"size", false}, {"calls", false}, {"time", false}, {"algbw", false}, {"busbw", false}, {"model time", false}, {"model busbw", false}, {"achieved / model", false}}
	var rows [][]string
	for _, s := range r.Bandwidth {
		mt, mbw, ratio := "", "", ""
		if s.Predicted > 0 {
			mt, mbw = dur(s.Predicted), gbs(s.ModelBW)
			if s.ModelBW > 0 {
				ratio = strconv.FormatFloat(s.BusBW/s.ModelBW, 'f', 2, 64)
			}
		}
		rows = append(rows, []string{s.Op, s.Algo, itoa(s.Ranks), size(s.Bytes), itoa(s.Calls), dur(s.Time), gbs(s.AlgBW), gbs(s.BusBW), mt, mbw, ratio})
	}
	table(m, "bandwidth", cols, rows, "No collective moved data.")
	end(m)
}

func stepsTable(m *markup, r *report.Report) {
	s := r.Steps
	if s == nil {
		return
	}
	section(m, "steps", "Training steps")
	warm := ""
	if s.Warmup > 0 {
		warm = " after the first (warm-up)"
	}
	overlap := dur(s.Overlapped)
	if s.Compute > 0 {
		overlap += " (" + pct(float64(s.Overlapped)/float64(s.Compute)) + " of it)"
	}
	note(m, fmt.Sprintf("%d steps per rank%s; a mean step of %s = compute %s + exposed communication %s + idle %s; communication overlapped %s of the compute; %s of the communication (every call and collective in the steps, start to end) hidden behind computation (the step's regions but wait, less blocking calls).",
		s.Steps, warm, dur(s.Step), dur(s.Compute), dur(s.Exposed), dur(s.Idle), overlap, pct(s.Hidden)))
	var rows [][]string
	for _, x := range s.PerRank {
		rows = append(rows, []string{itoa(x.Rank), itoa(x.Steps), dur(x.Step), dur(x.Compute), dur(x.Overlapped), dur(x.Exposed), dur(x.Idle)})
	}
	table(m, "steps", []column{{"rank", false}, {"steps", false}, {"step", false}, {"compute", false}, {"of it overlapped with comm", false}, {"exposed comm", false}, {"idle", false}}, rows, "")
	end(m)
}
