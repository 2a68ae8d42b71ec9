package report

import (
	"fmt"
	"io"
	"sort"
)

// change formats b against a: "12ms -> 9ms (-25.0%)".
func change(a, b int64) string {
	s := fmt.Sprintf("%s\t%s", Dur(a), Dur(b))
	if a == 0 {
		return s + "\t"
	}
	return s + fmt.Sprintf("\t%+.1f%%", 100*float64(b-a)/float64(a))
}

// Diff writes what changed from run a to run b of a program: the job's
// time, each rank's, each operation's and region's, the wait states, the
// efficiencies and the training step.
func Diff(out io.Writer, a, b *Report) error {
	w := &textWriter{w: out}
	w.printf("goprof diff: %s -> %s\n", a.Job.Dir, b.Job.Dir)
	if a.Job.Program != b.Job.Program {
		w.printf("warning:  the programs differ: %q and %q\n", a.Job.Program, b.Job.Program)
	}
	if a.Job.Size != b.Job.Size {
		w.printf("warning:  %d ranks against %d\n", a.Job.Size, b.Job.Size)
	}
	rows := []string{
		"duration\t" + change(a.Job.Duration, b.Job.Duration),
		"late sender\t" + change(a.LateSender.Total, b.LateSender.Total),
		"wait at collective\t" + change(a.CollWait.Total, b.CollWait.Total),
		"max app time\t" + change(a.Imbalance.MaxApp, b.Imbalance.MaxApp),
	}
	if a.Steps != nil && b.Steps != nil {
		rows = append(rows,
			"step\t"+change(a.Steps.Step, b.Steps.Step),
			"  compute\t"+change(a.Steps.Compute, b.Steps.Compute),
			"  (overlapped)\t"+change(a.Steps.Overlapped, b.Steps.Overlapped),
			"  exposed comm\t"+change(a.Steps.Exposed, b.Steps.Exposed),
			"  idle\t"+change(a.Steps.Idle, b.Steps.Idle))
	}
	w.table("Job", "\tA\tB\tchange", rows)
	w.printf("  parallel efficiency %s -> %s, load balance %s -> %s, communication efficiency %s -> %s\n",
		pct(a.POP.ParallelEfficiency), pct(b.POP.ParallelEfficiency), pct(a.POP.LoadBalance), pct(b.POP.LoadBalance),
		pct(a.POP.CommEfficiency), pct(b.POP.CommEfficiency))

	rows = nil
	rb := map[int]RankStat{}
	for _, s := range b.Ranks {
		rb[s.Rank] = s
	}
	for _, s := range a.Ranks {
		if t, ok := rb[s.Rank]; ok {
			rows = append(rows, fmt.Sprintf("%d\t%s\t%s", s.Rank, change(s.Comm, t.Comm), change(s.App, t.App)))
		}
	}
	w.table("Communication and app time per rank", "rank\tcomm A\tcomm B\tchange\tapp A\tapp B\tchange", rows)

	var oa, ob, ra, rb2 []measure
	for _, s := range a.Ops {
		oa = append(oa, measure{s.Op, s.Total, s.Count})
	}
	for _, s := range b.Ops {
		ob = append(ob, measure{s.Op, s.Total, s.Count})
	}
	w.table("Operations (total time, all ranks)", "op\tcalls A\tcalls B\tA\tB\tchange", compare(oa, ob))
	for _, s := range a.Regions {
		ra = append(ra, measure{s.Name, s.Mean, s.Count})
	}
	for _, s := range b.Regions {
		rb2 = append(rb2, measure{s.Name, s.Mean, s.Count})
	}
	if len(ra)+len(rb2) > 0 {
		w.table("Regions (mean time)", "region\tcount A\tcount B\tA\tB\tchange", compare(ra, rb2))
	}
	return w.err
}

// measure is a named time and count from one run.
type measure struct {
	name  string
	ns    int64
	count int
}

// compare writes a row per name in either run: the counts, the times and
// the change, the biggest time first.
func compare(a, b []measure) []string {
	type pair struct{ a, b measure }
	by := map[string]*pair{}
	var names []string
	for _, x := range a {
		by[x.name] = &pair{a: x}
		names = append(names, x.name)
	}
	for _, x := range b {
		if p := by[x.name]; p != nil {
			p.b = x
		} else {
			by[x.name] = &pair{b: x}
			names = append(names, x.name)
		}
	}
	sort.Slice(names, func(i, k int) bool {
		pi, pk := by[names[i]], by[names[k]]
		wi, wk := max(pi.a.ns, pi.b.ns), max(pk.a.ns, pk.b.ns)
		if wi != wk {
			return wi > wk
		}
		return names[i] < names[k]
	})
	rows := make([]string, len(names))
	for i, n := range names {
		p := by[n]
		rows[i] = fmt.Sprintf("%s\t%d\t%d\t%s", n, p.a.count, p.b.count, change(p.a.ns, p.b.ns))
	}
	return rows
}
