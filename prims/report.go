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
// Shared algorithms' memory, as SharedMemory does), and rank 0 writes to
// out what topo says of the machine (topo.Describe: the hosts, whether
// their ranks share memory, the fitted constants), whether the Shared
// algorithms run in that memory where they apply, and the algorithm
// Choose picks for each collective by size.
func Report(ctx context.Context, w *spmd.World, out io.Writer) error {
	m, err := topo.ModelFor(ctx, w.Comm)
	if err != nil {
		return fmt.Errorf("topology report: %w", err)
	}
	inUse := SharedMemory(w.Comm)
	if w.Rank() == 0 {
		if err := format(out, m, topo.LayoutOf(w.Comm), inUse); err != nil {
			return fmt.Errorf("topology report: %w", err)
		}
	}
	return nil
}

// format writes the report of model m on layout lay: topo.Describe's;
// where the ranks share memory but the Shared algorithms do not run in it
// (inUse, SharedMemory's answer, says why), a line that says so, since
// Choose still picks them; then per collective the ranges of sizes from
// tableMin to tableMax at which each algorithm is chosen.
func format(w io.Writer, m topo.Model, lay topo.Layout, inUse error) error {
	var b strings.Builder
	if err := topo.Describe(&b, m, lay); err != nil {
		return err
	}
	if lay.Shared && inUse != nil {
		fmt.Fprintf(&b, "\nshared memory: not in use on rank 0, where the Shared algorithms chosen below fail or run message algorithms: %v\n", inUse)
	}
	p := lay.Size()
	fmt.Fprintf(&b, "\n# algorithm by size (bytes per call, as nccl-tests counts them)\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for _, coll := range topo.Collectives {
		name := coll.String()
		if coll == topo.Barrier {
			fmt.Fprintf(tw, "%s\t\t%s\n", name, Cheapest(m, coll, p, 0, lay))
			continue
		}
		for _, r := range table(m, coll, p, lay) {
			fmt.Fprintf(tw, "%s\t%s - %s\t%s\n", name, topo.Size(r.from), topo.Size(r.to), r.algo)
			name = ""
		}
	}
	tw.Flush()
	_, err := io.WriteString(w, b.String())
	return err
}

// sizeRange is a span of sizes, from to to bytes inclusive, over which one
// algorithm is chosen.
type sizeRange struct {
	from, to int
	algo     topo.Algo
}

// tableMin and tableMax bound the sizes the report gives.
const (
	tableMin = 8
	tableMax = 64 << 20
)

// table returns the algorithm the model chooses for coll on p ranks laid
// out as lay, as ranges over the powers of two from tableMin to tableMax
// bytes: each range runs from the first size of a run of equal choices to
// its last.
func table(m topo.Model, coll topo.Collective, p int, lay topo.Layout) []sizeRange {
	var t []sizeRange
	for n := tableMin; n <= tableMax; n *= 2 {
		a := Cheapest(m, coll, p, n, lay)
		if len(t) > 0 && t[len(t)-1].algo == a {
			t[len(t)-1].to = n
			continue
		}
		t = append(t, sizeRange{from: n, to: n, algo: a})
	}
	return t
}
