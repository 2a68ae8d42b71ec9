package plan

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
)

// Rank models every layout Layouts gives for the job on the machine and
// orders them: those that fit in Job.MemPerRank first, each group by
// modelled step time, ties by memory and then by name, so that the order
// is the same on every run. It fails with an error wrapping ErrJob or
// ErrMachine, naming the fields, if the job or the machine is not valid,
// and with ErrNoLayout if no layout is.
func Rank(job Job, m Machine) ([]Estimate, error) {
	if err := job.Validate(); err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, err
	}
	ls := Layouts(job)
	if len(ls) == 0 {
		return nil, errorf(ErrNoLayout, "plan: no layout runs %d ranks: TP must divide the %d heads and fit in a host of %d ranks, "+
			"PP divide the %d layers, DP the global batch of %d; pass a rank count or batch with common factors",
			job.Ranks, job.Model.Heads, job.perHost(), job.Model.Layers, job.GlobalBatch)
	}
	es := make([]Estimate, len(ls))
	for i, l := range ls {
		es[i] = EstimateLayout(job, m, l)
	}
	slices.SortStableFunc(es, compare)
	return es, nil
}

// compare orders estimates as Rank does.
func compare(a, b Estimate) int {
	if a.Fits != b.Fits {
		if a.Fits {
			return -1
		}
		return 1
	}
	return cmp.Or(cmp.Compare(a.Step, b.Step), cmp.Compare(a.Memory, b.Memory),
		cmp.Compare(a.Layout.String(), b.Layout.String()))
}

// Write prints the first top estimates (all if top <= 0) as a table:
// rank, layout, step ms, tokens/s, memory per rank, whether it fits, the
// parts of the step in ms (compute, tp, pp, bubble, dp, optimizer) and the
// reasons; then a line naming the first choice and why. It fails with
// ErrNoLayout if es is empty, or with w's error.
func Write(w io.Writer, es []Estimate, top int) error {
	if len(es) == 0 {
		return errorf(ErrNoLayout, "plan: no estimates to write: pass Rank's result")
	}
	if top <= 0 || top > len(es) {
		top = len(es)
	}
	var buf bytes.Buffer
	tw := tabwriter.NewWriter(&buf, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "rank\tlayout\tstep ms\ttokens/s\tmemory\tfits\tcompute\ttp\tpp\tbubble\tdp\topt\treasons")
	for i, e := range es[:top] {
		fits := "no"
		if e.Fits {
			fits = "yes"
		}
		fmt.Fprintf(tw, "%d\t%s\t%.3f\t%.0f\t%s\t%s\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%s\n",
			i+1, e.Layout, ms(e.Step), e.TokensPerSec, GiB(e.Memory), fits,
			ms(e.Compute), ms(e.TPComm), ms(e.PPComm), ms(e.Bubble), ms(e.DPComm), ms(e.Optimizer),
			strings.Join(e.Reasons, "; "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(&buf, choice(es[0]))
	_, err := w.Write(buf.Bytes())
	return err
}

// choice is the closing line about the first estimate.
func choice(e Estimate) string {
	head := "first choice"
	if !e.Fits {
		head = "no layout fits; the first"
	}
	return fmt.Sprintf("%s: %s, %.3f ms a step, %.0f tokens/s, %s a rank: %s",
		head, e.Layout, ms(e.Step), e.TokensPerSec, GiB(e.Memory), strings.Join(e.Reasons, "; "))
}

// ms is seconds in milliseconds.
func ms(s float64) float64 { return s * 1e3 }
