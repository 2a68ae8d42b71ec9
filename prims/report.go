package prims

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// Report is what gorun --topo prints: every rank of w calls it (it probes
// collectively when no model is cached yet, as Choose does, and maps the
// Shared algorithms' memory, as SharedMemory does, and takes rank 0's
// decision table, as Choose does), and rank 0 writes to out what topo says
// of the machine (topo.Describe: the hosts, whether their ranks share
// memory, the fitted constants), whether the Shared algorithms run in that
// memory where they apply, and the algorithm Choose picks for each
// collective by size, from the decision table or from the model.
func Report(ctx context.Context, w *spmd.World, out io.Writer) error {
	m, err := topo.ModelFor(ctx, w.Comm)
	if err != nil {
		return fmt.Errorf("topology report: %w", err)
	}
	t, err := tableFor(ctx, w.Comm)
	if err != nil {
		return fmt.Errorf("topology report: %w", err)
	}
	inUse := SharedMemory(w.Comm)
	if w.Rank() == 0 {
		if err := format(out, m, t, topo.LayoutOf(w.Comm), inUse); err != nil {
			return fmt.Errorf("topology report: %w", err)
		}
	}
	return nil
}

// format writes the report of model m on layout lay: topo.Describe's;
// where the ranks share memory but the Shared algorithms do not run in it
// (inUse, SharedMemory's answer, says why), a line that says so, since
// Choose still picks them; the decision table t's origin, if any; then
// per collective the ranges of sizes from tableMin to tableMax at which
// each algorithm is chosen, and whether t or m chooses it.
func format(w io.Writer, m topo.Model, t *tuned, lay topo.Layout, inUse error) error {
	var b strings.Builder
	if err := topo.Describe(&b, m, lay); err != nil {
		return err
	}
	if lay.Shared && inUse != nil {
		fmt.Fprintf(&b, "\nshared memory: not in use on rank 0, where the Shared algorithms chosen below fail or run message algorithms: %v\n", inUse)
	}
	if t != nil {
		fmt.Fprintf(&b, "\ndecision table: %s\n", t.source)
	}
	p := lay.Size()
	fmt.Fprintf(&b, "\n# algorithm by size (bytes per call, as nccl-tests counts them)\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, coll := range topo.Collectives {
		name := coll.String()
		if coll == topo.Barrier {
			a, src := decide(m, t, coll, p, 0, lay)
			fmt.Fprintf(tw, "%s\t\t%s\t(%s)\n", name, a, src)
			continue
		}
		for _, r := range table(m, t, coll, p, lay) {
			fmt.Fprintf(tw, "%s\t%s - %s\t%s\t(%s)\n", name, topo.Size(r.from), topo.Size(r.to), r.algo, r.src)
			name = ""
		}
	}
	tw.Flush()
	_, err := io.WriteString(w, b.String())
	return err
}

// sizeRange is a span of sizes, from to to bytes inclusive, over which one
// algorithm is chosen by one source: "table" or "model".
type sizeRange struct {
	from, to int
	algo     topo.Algo
	src      string
}

// tableMin and tableMax bound the sizes the report gives.
const (
	tableMin = 8
	tableMax = 64 << 20
)

// table returns the algorithm chosen for coll on p ranks laid out as lay
// (decide), as ranges over the powers of two from tableMin to tableMax
// bytes: each range runs from the first size of a run of equal choices to
// its last.
func table(m topo.Model, tab *tuned, coll topo.Collective, p int, lay topo.Layout) []sizeRange {
	var t []sizeRange
	for n := tableMin; n <= tableMax; n *= 2 {
		a, src := decide(m, tab, coll, p, n, lay)
		if len(t) > 0 && t[len(t)-1].algo == a && t[len(t)-1].src == src {
			t[len(t)-1].to = n
			continue
		}
		t = append(t, sizeRange{from: n, to: n, algo: a, src: src})
	}
	return t
}

// decide is Choose's answer, unforced, for coll at n bytes under the
// decision table t and the model m, and which of them gave it.
func decide(m topo.Model, t *tuned, coll topo.Collective, p, n int, lay topo.Layout) (topo.Algo, string) {
	if a, ok := t.lookup(coll, n); ok {
		return a, "table"
	}
	return Cheapest(m, coll, p, n, lay), "model"
}
