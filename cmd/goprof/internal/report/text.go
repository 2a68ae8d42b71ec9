package report

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/gorun-hpc/gorun/cmd/goprof/internal/job"
)

// Dur formats ns nanoseconds for people, to three significant digits in
// the unit that keeps the number under 1000: 812ns, 12.3µs, 4.56ms, 7.89s.
func Dur(ns int64) string {
	sign := ""
	if ns < 0 {
		sign, ns = "-", -ns
	}
	if ns < 1000 {
		return sign + strconv.FormatInt(ns, 10) + "ns"
	}
	units := [...]struct {
		name string
		per  float64
	}{{"µs", 1e3}, {"ms", 1e6}, {"s", 1e9}}
	for i, u := range units {
		v := float64(ns) / u.per
		switch {
		case v < 999.5:
			return sign + strconv.FormatFloat(v, 'g', 3, 64) + u.name
		case i == len(units)-1:
			return sign + strconv.FormatFloat(v, 'f', 0, 64) + u.name
		}
	}
	panic("unreachable")
}

// Size formats a byte count: 8B, 4KiB, 1.5MiB, to a tenth of the unit
// that keeps the number under 1024.
func Size(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + "B"
	}
	v := float64(n)
	for i, u := range [...]string{"KiB", "MiB", "GiB", "TiB"} {
		v /= 1024
		if v < 1023.95 || i == 3 {
			return strings.TrimSuffix(strconv.FormatFloat(v, 'f', 1, 64), ".0") + u
		}
	}
	panic("unreachable")
}

func times(n int) string {
	if n == 1 {
		return "once"
	}
	return fmt.Sprintf("%d times", n)
}

// plural is "1 step" or "n steps".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func pct(f float64) string { return fmt.Sprintf("%.1f%%", 100*f) }

// Text writes the report for people.
func (r *Report) Text(out io.Writer) error {
	w := &textWriter{w: out}
	r.textJob(w)
	r.textRanks(w)
	r.textOps(w, "Operations", r.Ops, false)
	r.textOps(w, "Call sites", r.Sites, true)
	r.textRegions(w)
	r.textBalance(w)
	r.textWaits(w)
	r.textBandwidth(w)
	r.textSteps(w)
	r.textPipeline(w)
	return w.err
}

// textWriter keeps the first write error.
type textWriter struct {
	w   io.Writer
	err error
}

func (w *textWriter) printf(format string, a ...any) {
	if w.err == nil {
		_, w.err = fmt.Fprintf(w.w, format, a...)
	}
}

// table writes rows through a tabwriter under a section title.
func (w *textWriter) table(title string, header string, rows []string) {
	w.printf("\n%s\n", title)
	if w.err != nil {
		return
	}
	tw := tabwriter.NewWriter(w.w, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, header+"\t")
	for _, row := range rows {
		fmt.Fprintln(tw, row+"\t")
	}
	w.err = tw.Flush()
}

func (r *Report) textJob(w *textWriter) {
	j := r.Job
	w.printf("goprof report: %s\n", j.Dir)
	if j.Program != "" {
		w.printf("program:  %s\n", j.Program)
	}
	w.printf("job:      %s", plural(j.Size, "rank"))
	if j.ID != "" {
		w.printf(", id %s", j.ID)
	}
	if j.Restart > 0 {
		w.printf(", start %d (gorun restarted it %s)", j.Restart, times(j.Restart))
	}
	w.printf(", %s, %d events\n", Dur(j.Duration), j.Events)
	if len(j.Ranks) != j.Size {
		w.printf("ranks:    %s\n", job.Ranges(j.Ranks))
	}
	for _, p := range j.Problems {
		w.printf("warning:  %s\n", p)
	}
	for _, n := range j.Notes {
		w.printf("note:     %s\n", n)
	}
}

func (r *Report) textRanks(w *textWriter) {
	title, col := "Time per rank (comm: inside blocking calls; async: non-blocking collectives in flight)", "clock offset"
	if r.OneHost() {
		title += "\n  (one host, one clock: a rank's offset is how long after rank 0 it started tracing, not skew)"
		col = "started"
	}
	var rows []string
	for _, s := range r.Ranks {
		off := Dur(s.Offset)
		if s.Offset > 0 {
			off = "+" + off
		}
		rows = append(rows, fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s", s.Rank, s.Host, Dur(s.Wall), Dur(s.App), Dur(s.Comm), pct(s.CommShare), Dur(s.Async), Size(s.HeapPeak), off))
	}
	w.table(title, "rank\thost\twall\tapp\tcomm\tcomm%\tasync\theap peak\t"+col, rows)
}

func (r *Report) textOps(w *textWriter, title string, ops []OpStat, sites bool) {
	const limit = 20
	var rows []string
	for i, s := range ops {
		if i == limit {
			rows = append(rows, fmt.Sprintf("(%d more)\t\t\t\t\t\t\t\t", len(ops)-limit))
			break
		}
		share := ""
		if s.Share > 0 {
			share = pct(s.Share)
		}
		row := fmt.Sprintf("%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s", s.Op, s.Count, Dur(s.Total), Dur(s.Mean), Dur(s.Max), Size(s.Bytes), share, sizes(s.Sizes))
		if sites {
			row = s.Site + "\t" + row
		}
		rows = append(rows, row)
	}
	header := "op\tcalls\ttotal\tmean\tmax\tbytes\tcomm%\tsizes"
	if sites {
		header = "site\t" + header
	}
	w.table(title+" (all ranks)", header, rows)
}

// sizes writes a histogram as "≤8B:12 ≤1MiB:3".
func sizes(bs []Bucket) string {
	var parts []string
	for _, b := range bs {
		parts = append(parts, fmt.Sprintf("≤%s:%d", Size(b.Upto), b.Count))
	}
	return strings.Join(parts, " ")
}

func (r *Report) textRegions(w *textWriter) {
	if len(r.Regions) == 0 {
		return
	}
	var rows []string
	for _, s := range r.Regions {
		rows = append(rows, fmt.Sprintf("%s\t%d\t%s\t%s\t%s\t%.2f", s.Name, s.Count, Dur(s.Total), Dur(s.Mean), Dur(s.Max), s.CV))
	}
	w.table("Regions (all ranks; cv: of the ranks' totals"+r.leftOut()+")", "region\tcount\ttotal\tmean\tmax\tcv", rows)
}

func (r *Report) textBalance(w *textWriter) {
	im, p := r.Imbalance, r.POP
	title := "Load balance"
	if l := r.leftOut(); l != "" {
		title += " (" + strings.TrimPrefix(l, "; ") + ")"
	}
	w.printf("\n%s\n", title)
	w.printf("  app time: mean %s, max %s on rank %d, cv %.3f; comm time cv %.3f\n", Dur(im.MeanApp), Dur(im.MaxApp), im.MostLoaded, im.AppCV, im.CommCV)
	w.printf("  POP: parallel efficiency %s = load balance %s x communication efficiency %s\n", pct(p.ParallelEfficiency), pct(p.LoadBalance), pct(p.CommEfficiency))
}

func (r *Report) textWaits(w *textWriter) {
	ls := r.LateSender
	w.printf("\nWait states\n")
	w.printf("  late sender: %s lost in %d receives\n", Dur(ls.Total), ls.Count)
	for i, p := range ls.Pairs {
		if i == 5 {
			break
		}
		w.printf("    rank %d waited %s for rank %d (%s, longest %s)\n", p.Receiver, Dur(p.Total), p.Sender, times(p.Count), Dur(p.Max))
	}
	cw := r.CollWait
	w.printf("  wait at collective: %s over %d calls", Dur(cw.Total), cw.Instances)
	var per []string
	for _, x := range cw.PerRank {
		per = append(per, fmt.Sprintf("%d:%s", x.Rank, Dur(x.Wait)))
	}
	if len(per) > 0 && len(per) <= 32 {
		w.printf(" (by rank %s)", strings.Join(per, " "))
	}
	w.printf("\n")
	for _, s := range cw.Worst {
		w.printf("    %s #%d on comm %d at %s: entries %s apart, rank %d last\n", s.Op, s.Seq, s.Comm, Dur(s.At), Dur(s.Spread), s.Last)
	}
	if len(r.Stragglers) > 0 {
		w.printf("  stragglers (last into a collective):")
		for i, s := range r.Stragglers {
			if i == 4 {
				break
			}
			w.printf(" rank %d %s (%s, cost %s);", s.Rank, times(s.Last), pct(s.Share), Dur(s.Delay))
		}
		w.printf("\n")
	}
}

func (r *Report) textBandwidth(w *textWriter) {
	if len(r.Bandwidth) == 0 {
		return
	}
	var rows []string
	for _, s := range r.Bandwidth {
		model, ratio := "", ""
		if s.Predicted > 0 {
			model = fmt.Sprintf("%s\t%.3g", Dur(s.Predicted), s.ModelBW)
			ratio = fmt.Sprintf("%.2f", s.BusBW/s.ModelBW)
		} else {
			model = "\t"
		}
		rows = append(rows, fmt.Sprintf("%s\t%s\t%d\t%s\t%d\t%s\t%.3g\t%.3g\t%s\t%s", s.Op, s.Algo, s.Ranks, Size(s.Bytes), s.Calls, Dur(s.Time), s.AlgBW, s.BusBW, model, ratio))
	}
	w.table("Collective bandwidth (time: last entry to last exit; GB/s; model: topo's prediction"+r.leftOut()+")",
		"op\talgo\tranks\tsize\tcalls\ttime\talgbw\tbusbw\tmodel time\tmodel busbw\tachieved/model", rows)
}

// overlapPart says how much of the compute, of a step, had communication
// overlapped with it: "40ms (42.1% of compute, 40.0% of the step)".
func overlapPart(overlapped, compute, step int64) string {
	if compute == 0 || step == 0 {
		return Dur(overlapped)
	}
	return fmt.Sprintf("%s (%s of compute, %s of the step)", Dur(overlapped), pct(float64(overlapped)/float64(compute)), pct(float64(overlapped)/float64(step)))
}

func (r *Report) textSteps(w *textWriter) {
	s := r.Steps
	if s == nil {
		return
	}
	part := func(ns int64) string {
		if s.Step == 0 {
			return Dur(ns)
		}
		return fmt.Sprintf("%s (%s)", Dur(ns), pct(float64(ns)/float64(s.Step)))
	}
	w.printf("\nTraining steps (%d per rank%s, mean over ranks)\n", s.Steps, warmupNote(s.Warmup))
	w.printf("  step %s = compute %s + exposed comm %s + idle %s\n", Dur(s.Step), part(s.Compute), part(s.Exposed), part(s.Idle))
	w.printf("  compute overlapped with communication: %s\n", overlapPart(s.Overlapped, s.Compute, s.Step))
	w.printf("  communication hidden behind computation: %s (overlapped / all communication in the steps, every call\n", pct(s.Hidden))
	w.printf("  and collective from its start to its end; computation: the step's regions but wait, less blocking calls)\n")
	var rows []string
	for _, x := range s.PerRank {
		rows = append(rows, fmt.Sprintf("%d\t%d\t%s\t%s\t(%s)\t%s\t%s", x.Rank, x.Steps, Dur(x.Step), Dur(x.Compute), Dur(x.Overlapped), Dur(x.Exposed), Dur(x.Idle)))
	}
	if len(rows) > 1 {
		w.table("  per rank (step = compute + exposed + idle; overlapped is part of compute)", "rank\tsteps\tstep\tcompute\t(overlapped)\texposed\tidle", rows)
	}
}
