package prims

import (
	"math"
	"testing"

	"github.com/gorun-hpc/gorun/topo"
)

// The costs of the algorithms (choose.go, and beside each algorithm's
// code), on machines with fixed constants.

// goldenModel is a fixed machine for the golden decisions: loopback-like
// links inside a host, a 10 GbE-like network between hosts.
var goldenModel = topo.Model{
	Local:  topo.Link{Alpha: 10e-6, Beta: 1 / 2.5e9},
	Remote: topo.Link{Alpha: 40e-6, Beta: 1 / 1.2e9},
	Gamma:  1 / 5e9,
	Cores:  8,

	LocalProbed: true, RemoteProbed: true,
}

// oversubscribed is goldenModel on hosts of two cores.
func oversubscribed() topo.Model {
	m := goldenModel
	m.Cores = 2
	m.Wake = 5e-6
	return m
}

// pulling is oversubscribed with single copy from 256 KiB inside a host.
func pulling() topo.Model {
	m := oversubscribed()
	m.Local.Pull = 256 << 10
	return m
}

// TestCostClosedForms checks the formulas against DESIGN.md's closed forms
// where they apply exactly: one host with cores to spare, p a power of two,
// and no round moving more than topo.Overlap bytes in one piece (see
// TestCostUnsegmented for the larger ones).
func TestCostClosedForms(t *testing.T) {
	m := goldenModel
	m.Cores = 1 << 20
	a, b, g := m.Local.Alpha, m.Local.Beta, m.Gamma
	const n = topo.Overlap
	for _, p := range []int{2, 4, 8, 16} {
		P, lgp := float64(p), float64(lg(p))
		tests := []struct {
			coll topo.Collective
			algo topo.Algo
			want float64
		}{
			// DESIGN.md's n(p-1)/p g, but prims' segmented ring hides all but
			// the last segment's reduction behind the transfers.
			{topo.AllReduce, topo.Ring, 2*(P-1)*a + 2*n*(P-1)/P*b + min(n/P, SegmentBytes)*g},
			{topo.AllReduce, topo.RecursiveDoubling, lgp * (a + n*b + n*g)},
			{topo.AllReduce, topo.Rabenseifner, 2*lgp*a + 2*n*(P-1)/P*b + n*(P-1)/P*g},
			{topo.Broadcast, topo.Tree, lgp * (a + n*b)},
			{topo.AllGather, topo.Ring, (P - 1) * (a + n/P*b)},
			{topo.AllGather, topo.RecursiveDoubling, lgp*a + n*(P-1)/P*b},
			// Reducing into a copy of the vector: n g more.
			{topo.ReduceScatter, topo.Rabenseifner, n*g + lgp*a + n*(P-1)/P*(b+g)},
			{topo.Gather, topo.Tree, lgp*a + n*(P-1)/P*b + n/P*b}, // and the root's own block
			{topo.Scatter, topo.Tree, lgp*a + n*(P-1)/P*b},
			// Everything posted at once: one latency, a quarter of one
			// for each further message, the bytes of p-1 blocks.
			{topo.AllToAll, topo.Linear, a + (P-2)*topo.BurstGap*a + (P-1)*2*n/P*b},
			{topo.AllGather, topo.Linear, a + (P-2)*topo.BurstGap*a + (P-1)*2*n/P*b},
			{topo.ReduceScatter, topo.Linear, a + (P-2)*topo.BurstGap*a + (P-1)*n/P*(2*b+g)},
			{topo.Barrier, topo.RecursiveDoubling, lgp * a},
		}
		for _, tt := range tests {
			got := Cost(m, tt.coll, tt.algo, p, n, topo.Uniform(1, p))
			if math.Abs(got-tt.want) > 1e-9*tt.want {
				t.Errorf("p=%d %s %s: cost %g, want %g", p, tt.coll, tt.algo, got, tt.want)
			}
		}
	}
}

// TestCostUnsegmented: a recursive-doubling round that moves more than
// topo.Overlap bytes in one piece pays beta once more for the bytes past it.
func TestCostUnsegmented(t *testing.T) {
	m := goldenModel
	m.Cores = 1 << 20
	a, b, g := m.Local.Alpha, m.Local.Beta, m.Gamma
	const n = 4 << 20
	for _, p := range []int{2, 4, 8} {
		lgp := float64(lg(p))
		want := lgp*(a+n*b+n*g) + lgp*(n-topo.Overlap)*b
		if got := Cost(m, topo.AllReduce, topo.RecursiveDoubling, p, n, topo.Uniform(1, p)); math.Abs(got-want) > 1e-9*want {
			t.Errorf("p=%d recdbl all-reduce of %d bytes: cost %g, want %g", p, n, got, want)
		}
	}
}

// TestCostCrowded: on a host with more ranks than cores, the tree
// all-reduce pays beta once more for the bytes of each of its reduction
// rounds past topo.WholeOverlap, except over a link that pulls them; nothing
// else does. And a linear broadcast that does not pull pays the wake-up of
// the ranks beyond the cores once.
func TestCostCrowded(t *testing.T) {
	const p = 4
	lay := topo.Uniform(1, p)
	tree := func(m topo.Model, n float64) float64 {
		whole := func(int) float64 { return n }
		s := topo.ShapeOf(p, lay)
		return binomialCost(m, s, whole, true) + binomialCost(m, s, whole, false)
	}
	m := oversubscribed()
	b := m.Local.Beta * topo.CrowdedCopy
	for _, tt := range []struct {
		name  string
		m     topo.Model
		n     float64
		extra float64
	}{
		// Reduction rounds at np 4: two ranks send at once (4 busy
		// endpoints on 2 cores: beta twice over), then one (2: once).
		{"crowded, 1 MiB", m, 1 << 20, (1<<20 - topo.WholeOverlap) * b * (2 + 1)},
		{"crowded, 4 MiB", m, 4 << 20, (4<<20 - topo.WholeOverlap) * b * (2 + 1)},
		{"crowded, at topo.WholeOverlap", m, topo.WholeOverlap, 0},
		{"cores to spare", goldenModel, 4 << 20, 0},
		{"pulled", pulling(), 4 << 20, 0},
	} {
		want := tree(tt.m, tt.n) + tt.extra
		if got := Cost(tt.m, topo.AllReduce, topo.Tree, p, int(tt.n), lay); math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s: tree all-reduce costs %g, want %g", tt.name, got, want)
		}
	}
	// topo.Reduce and broadcast trees pay nothing more.
	n := float64(4 << 20)
	s := topo.ShapeOf(p, lay)
	whole := func(int) float64 { return n }
	if got, want := Cost(m, topo.Reduce, topo.Tree, p, int(n), lay), binomialCost(m, s, whole, true); got != want {
		t.Errorf("crowded tree reduce costs %g, want %g", got, want)
	}
	if got, want := Cost(m, topo.Broadcast, topo.Tree, p, int(n), lay), binomialCost(m, s, whole, false); got != want {
		t.Errorf("crowded tree broadcast costs %g, want %g", got, want)
	}
	// topo.Linear broadcast: p-1 messages one after another, and one wake-up of
	// the p-Cores ranks beyond the cores.
	for _, mm := range []topo.Model{m, goldenModel} {
		a := mm.Local.Alpha
		beta := mm.Local.Beta
		if mm.Cores < p {
			beta *= topo.CrowdedCopy
		}
		want := float64(p-1)*(a+n*beta) + mm.Wake*float64(max(0, p-mm.Cores))
		if got := Cost(mm, topo.Broadcast, topo.Linear, p, int(n), lay); math.Abs(got-want) > 1e-9*want {
			t.Errorf("cores %d: linear broadcast costs %g, want %g", mm.Cores, got, want)
		}
	}
}

// TestCostCrowdedWork: on one host with more ranks than cores, no
// collective costs less than its messages times two alphas over the
// cores; with cores to spare, on several hosts, and for the topo.Shared
// algorithms, the rounds alone count.
func TestCostCrowdedWork(t *testing.T) {
	m := oversubscribed()
	a := m.Local.Alpha
	floor := func(msgs float64) float64 { return msgs * 2 * a / float64(m.Cores) }
	for _, tt := range []struct {
		coll topo.Collective
		algo topo.Algo
		p    int
		msgs float64
	}{
		{topo.AllGather, topo.Linear, 8, 56},
		{topo.AllGather, topo.RecursiveDoubling, 8, 24},
		{topo.AllGather, topo.Ring, 4, 12},
		{topo.ReduceScatter, topo.Rabenseifner, 8, 24},
		{topo.AllReduce, topo.Ring, 4, 24},
		{topo.AllReduce, topo.Tree, 8, 14},
		{topo.AllReduce, topo.RecursiveDoubling, 6, 4*2 + 4}, // 4 ranks double, 2 fold in and out
		{topo.AllReduce, topo.Rabenseifner, 8, 48},
		{topo.AllReduce, topo.Linear, 8, 14},
		{topo.Broadcast, topo.Linear, 8, 7},
		{topo.Barrier, topo.RecursiveDoubling, 8, 24},
		{topo.AllToAll, topo.Linear, 4, 12},
	} {
		lay := topo.Uniform(1, tt.p)
		e := estimateOf(m, tt.coll, tt.algo, topo.ShapeOf(tt.p, lay), 8)
		if e.messages != tt.msgs {
			t.Errorf("%s %s p=%d: %g messages, want %g", tt.coll, tt.algo, tt.p, e.messages, tt.msgs)
		}
		rounds := e.rounds
		want := max(rounds, floor(tt.msgs))
		if got := Cost(m, tt.coll, tt.algo, tt.p, 8, lay); math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s %s p=%d, 8 B: cost %g, want %g (rounds %g)", tt.coll, tt.algo, tt.p, got, want, rounds)
		}
	}
	for _, algo := range []topo.Algo{topo.Shared, topo.Hierarchical} {
		if got := estimateOf(m, topo.AllReduce, algo, topo.ShapeOf(8, sharedLayout(topo.Uniform(1, 8))), 8).messages; got != 0 {
			t.Errorf("%s all-reduce: %g messages, want none counted", algo, got)
		}
	}
	// The bound decides where the rounds price a burst too low: 56
	// messages of the linear all-gather at np 8 against 24 of doubling.
	lay := topo.Uniform(1, 8)
	if lin, dbl := Cost(m, topo.AllGather, topo.Linear, 8, 64, lay), Cost(m, topo.AllGather, topo.RecursiveDoubling, 8, 64, lay); lin < floor(56) || lin <= dbl {
		t.Errorf("crowded all-gather of 64 B at np 8: linear %g, doubling %g; want linear >= %g and above doubling", lin, dbl, floor(56))
	}
	// Nowhere else.
	for _, tt := range []struct {
		name string
		m    topo.Model
		lay  topo.Layout
		algo topo.Algo
	}{
		{"cores to spare", goldenModel, topo.Uniform(1, 8), topo.Linear},
		{"two hosts", m, topo.Uniform(2, 4), topo.Linear},
		{"shared", m, sharedLayout(topo.Uniform(1, 8)), topo.Shared},
	} {
		p := len(tt.lay.Hosts) * len(tt.lay.Hosts[0])
		if got, want := Cost(tt.m, topo.AllGather, tt.algo, p, 64, tt.lay), estimateOf(tt.m, topo.AllGather, tt.algo, topo.ShapeOf(p, tt.lay), 64).rounds; got != want {
			t.Errorf("%s: all-gather of 64 B costs %g, want its rounds' %g", tt.name, got, want)
		}
	}
}

func sharedLayout(l topo.Layout) topo.Layout {
	l.Shared = true
	return l
}

func TestCostRules(t *testing.T) {
	m := goldenModel
	if c := Cost(m, topo.AllReduce, topo.Hierarchical, 8, 1<<20, topo.Uniform(1, 8)); !math.IsInf(c, 1) {
		t.Errorf("hierarchical on one host costs %g, want +Inf", c)
	}
	if c := Cost(m, topo.AllReduce, topo.Hierarchical, 8, 1<<20, topo.Uniform(2, 4)); math.IsInf(c, 0) || c <= 0 {
		t.Errorf("hierarchical on 2 hosts of 4 costs %g", c)
	}
	if c := Cost(m, topo.AllToAll, topo.Tree, 8, 1<<20, topo.Uniform(1, 8)); !math.IsInf(c, 1) {
		t.Errorf("a tree all-to-all costs %g, want +Inf", c)
	}
	// Folding: 5 ranks pay more than 4 for recursive doubling.
	if c4, c5 := Cost(m, topo.AllReduce, topo.RecursiveDoubling, 4, 1<<10, topo.Layout{}), Cost(m, topo.AllReduce, topo.RecursiveDoubling, 5, 1<<10, topo.Layout{}); c5 <= c4 {
		t.Errorf("recursive doubling on 5 ranks %g, not above 4 ranks %g", c5, c4)
	}
	// Crossing hosts costs the remote link.
	one, two := Cost(m, topo.AllReduce, topo.Ring, 8, 1<<20, topo.Uniform(1, 8)), Cost(m, topo.AllReduce, topo.Ring, 8, 1<<20, topo.Uniform(2, 4))
	if two <= one {
		t.Errorf("ring on 2 hosts %g, not above one host %g", two, one)
	}
	// Sharing two cores among 8 busy ranks slows the ring down.
	if over := Cost(oversubscribed(), topo.AllReduce, topo.Ring, 8, 1<<20, topo.Uniform(1, 8)); over <= one {
		t.Errorf("ring on 2 cores %g, not above 8 cores %g", over, one)
	}
	// A root whose receivers copy out of its memory sends to all at once:
	// linear beats the binomial tree inside a host from the single-copy
	// size, and is priced as before below it and across hosts.
	pm := pulling()
	for _, n := range []int{1 << 20, 64 << 20} {
		lin, tree := Cost(pm, topo.Broadcast, topo.Linear, 4, n, topo.Uniform(1, 4)), Cost(pm, topo.Broadcast, topo.Tree, 4, n, topo.Uniform(1, 4))
		if lin >= tree {
			t.Errorf("pulled linear broadcast of %d bytes at np 4 costs %g, not below the tree's %g", n, lin, tree)
		}
		if old := Cost(oversubscribed(), topo.Broadcast, topo.Linear, 4, n, topo.Uniform(1, 4)); lin >= old {
			t.Errorf("pulled linear broadcast %g, not below pushed %g", lin, old)
		}
	}
	// Below the single-copy size a message goes through the rings, two
	// copies at the pulled copy's beta (topo.Model.Copies); across hosts
	// it is priced alike with or without single copy.
	if a, b := Cost(pm, topo.Broadcast, topo.Linear, 4, 64<<10, topo.Uniform(1, 4)), Cost(oversubscribed(), topo.Broadcast, topo.Linear, 4, 64<<10, topo.Uniform(1, 4)); a <= b {
		t.Errorf("linear broadcast of 64 KiB on one host: %g with single copy, not above %g without", a, b)
	}
	if a, b := Cost(pm, topo.Broadcast, topo.Linear, 4, 1<<20, topo.Uniform(2, 2)), Cost(oversubscribed(), topo.Broadcast, topo.Linear, 4, 1<<20, topo.Uniform(2, 2)); a != b {
		t.Errorf("linear broadcast of 1 MiB on 2 hosts: %g with single copy, %g without", a, b)
	}
	for _, coll := range topo.Collectives {
		if c := Cost(m, coll, Algos(coll)[0], 1, 1<<20, topo.Layout{}); c != 0 {
			t.Errorf("%s on one rank costs %g", coll, c)
		}
	}
}

// A shared broadcast small enough for the cells, whose root runs ahead,
// pays a pair's wait however crowded the host: with 8 ranks on 2 cores
// and a slow wake it stays below linear, as collbench measures it (np 8,
// 8 B-2 KiB: 2-4 us against linear's 6-13). A larger one streams its
// chunks, SharedStreams ahead, and pays a pair's wait for each too.
func TestCostSharedCells(t *testing.T) {
	m := oversubscribed()
	m.Local.Alpha, m.Wake = 0.88e-6, 5.33e-6 // a probe's fit on 2 cores
	lay := topo.Uniform(1, 8)
	lay.Shared = true
	for _, n := range []int{8, 2 << 10, sharedCell} {
		if sh, lin := Cost(m, topo.Broadcast, topo.Shared, 8, n, lay), Cost(m, topo.Broadcast, topo.Linear, 8, n, lay); sh >= lin {
			t.Errorf("shared broadcast of %d bytes at np 8 on 2 cores costs %g, not below linear's %g", n, sh, lin)
		}
	}
	chunk, more := Cost(m, topo.Broadcast, topo.Shared, 8, sharedChunk, lay), Cost(m, topo.Broadcast, topo.Shared, 8, sharedChunk+8, lay)
	if more-chunk >= sharedLatency*m.Wake {
		t.Errorf("a shared broadcast's second chunk costs %g, a crowded round's wait (one chunk: %g)", more-chunk, chunk)
	}
}

// tcpCrowded is the model gorun --topo fitted over TCP with 4 ranks on 2
// cores for bench/results/choice/tcp-e (topo.4.txt).
func tcpCrowded() topo.Model {
	return topo.Model{
		Local:  topo.Link{Alpha: 9.61e-6, Beta: 0.3031e-9},
		Remote: topo.Link{Alpha: 50e-6, Beta: 0.9091e-9},
		Gamma:  0.0250e-9,
		Cores:  2,
		Wake:   16.96e-6,

		LocalProbed: true,
	}
}

// TestCostLinearAllReduce: with 4 or 8 ranks on 2 cores over TCP the
// linear all-reduce, with the fewest messages in 2 rounds, is chosen for
// small buffers, and its whole messages reduced at the root are charged
// as the tree's are, so that it gives way to the ring from 1 MiB; with
// cores to spare, recursive doubling's single round wins.
func TestCostLinearAllReduce(t *testing.T) {
	m := tcpCrowded()
	for _, p := range []int{4, 8} {
		lay := topo.Uniform(1, p)
		for _, tt := range []struct {
			bytes int
			want  topo.Algo
		}{{8, topo.Linear}, {4 << 10, topo.Linear}, {256 << 10, topo.Linear}, {2 << 20, topo.Ring}, {8 << 20, topo.Ring}} {
			if got := Cheapest(m, topo.AllReduce, p, tt.bytes, lay); got != tt.want {
				t.Errorf("np %d, %d B: chose %s, want %s (linear %.0f us, ring %.0f us)", p, tt.bytes, got, tt.want,
					1e6*Cost(m, topo.AllReduce, topo.Linear, p, tt.bytes, lay), 1e6*Cost(m, topo.AllReduce, topo.Ring, p, tt.bytes, lay))
			}
		}
	}
	spare := m
	spare.Cores = 8
	if got := Cheapest(spare, topo.AllReduce, 4, 8, topo.Uniform(1, 4)); got != topo.RecursiveDoubling {
		t.Errorf("4 ranks on 8 cores, 8 B: chose %s, want recdbl", got)
	}
}
