package topo

import (
	"math"
	"testing"
)

// TestCostClosedForms checks the formulas against DESIGN.md's closed forms
// where they apply exactly: one host with cores to spare, p a power of two,
// and no round moving more than Overlap bytes in one piece (see
// TestCostUnsegmented for the larger ones).
func TestCostClosedForms(t *testing.T) {
	m := goldenModel
	m.Cores = 1 << 20
	a, b, g := m.Local.Alpha, m.Local.Beta, m.Gamma
	const n = Overlap
	for _, p := range []int{2, 4, 8, 16} {
		P, lgp := float64(p), float64(lg(p))
		tests := []struct {
			coll Collective
			algo Algo
			want float64
		}{
			// DESIGN.md's n(p-1)/p g, but prims' segmented ring hides all but
			// the last segment's reduction behind the transfers.
			{AllReduce, Ring, 2*(P-1)*a + 2*n*(P-1)/P*b + min(n/P, Segment)*g},
			{AllReduce, RecursiveDoubling, lgp * (a + n*b + n*g)},
			{AllReduce, Rabenseifner, 2*lgp*a + 2*n*(P-1)/P*b + n*(P-1)/P*g},
			{Broadcast, Tree, lgp * (a + n*b)},
			{AllGather, Ring, (P - 1) * (a + n/P*b)},
			{AllGather, RecursiveDoubling, lgp*a + n*(P-1)/P*b},
			// Reducing into a copy of the vector: n g more.
			{ReduceScatter, Rabenseifner, n*g + lgp*a + n*(P-1)/P*(b+g)},
			{Gather, Tree, lgp*a + n*(P-1)/P*b},
			// Everything posted at once: one latency, a quarter of one
			// for each further message, the bytes of p-1 blocks.
			{AllToAll, Linear, a + (P-2)*BurstGap*a + (P-1)*n/P*b},
			{AllGather, Linear, a + (P-2)*BurstGap*a + (P-1)*n/P*b},
			{ReduceScatter, Linear, a + (P-2)*BurstGap*a + (P-1)*n/P*(b+g)},
			{Barrier, RecursiveDoubling, lgp * a},
		}
		for _, tt := range tests {
			got := m.Cost(tt.coll, tt.algo, p, n, Uniform(1, p))
			if math.Abs(got-tt.want) > 1e-9*tt.want {
				t.Errorf("p=%d %s %s: cost %g, want %g", p, tt.coll, tt.algo, got, tt.want)
			}
		}
	}
}

// TestCostUnsegmented: a recursive-doubling round that moves more than
// Overlap bytes in one piece pays beta once more for the bytes past it.
func TestCostUnsegmented(t *testing.T) {
	m := goldenModel
	m.Cores = 1 << 20
	a, b, g := m.Local.Alpha, m.Local.Beta, m.Gamma
	const n = 4 << 20
	for _, p := range []int{2, 4, 8} {
		lgp := float64(lg(p))
		want := lgp*(a+n*b+n*g) + lgp*(n-Overlap)*b
		if got := m.Cost(AllReduce, RecursiveDoubling, p, n, Uniform(1, p)); math.Abs(got-want) > 1e-9*want {
			t.Errorf("p=%d recdbl all-reduce of %d bytes: cost %g, want %g", p, n, got, want)
		}
	}
}

// TestCostCrowded: on a host with more ranks than cores, the tree
// all-reduce pays beta once more for the bytes of each of its reduction
// rounds past WholeOverlap, except over a link that pulls them; nothing
// else does. And a linear broadcast that does not pull pays the wake-up of
// the ranks beyond the cores once.
func TestCostCrowded(t *testing.T) {
	const p = 4
	lay := Uniform(1, p)
	tree := func(m Model, n float64) float64 {
		whole := func(int) float64 { return n }
		s := shapeOf(p, lay)
		return m.binomial(s, whole, true) + m.binomial(s, whole, false)
	}
	m := oversubscribed()
	b := m.Local.Beta * CrowdedCopy
	for _, tt := range []struct {
		name  string
		m     Model
		n     float64
		extra float64
	}{
		// Reduction rounds at np 4: two ranks send at once (4 busy
		// endpoints on 2 cores: beta twice over), then one (2: once).
		{"crowded, 1 MiB", m, 1 << 20, (1<<20 - WholeOverlap) * b * (2 + 1)},
		{"crowded, 4 MiB", m, 4 << 20, (4<<20 - WholeOverlap) * b * (2 + 1)},
		{"crowded, at WholeOverlap", m, WholeOverlap, 0},
		{"cores to spare", goldenModel, 4 << 20, 0},
		{"pulled", pulling(), 4 << 20, 0},
	} {
		want := tree(tt.m, tt.n) + tt.extra
		if got := tt.m.Cost(AllReduce, Tree, p, int(tt.n), lay); math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s: tree all-reduce costs %g, want %g", tt.name, got, want)
		}
	}
	// Reduce and broadcast trees pay nothing more.
	n := float64(4 << 20)
	s := shapeOf(p, lay)
	whole := func(int) float64 { return n }
	if got, want := m.Cost(Reduce, Tree, p, int(n), lay), m.binomial(s, whole, true); got != want {
		t.Errorf("crowded tree reduce costs %g, want %g", got, want)
	}
	if got, want := m.Cost(Broadcast, Tree, p, int(n), lay), m.binomial(s, whole, false); got != want {
		t.Errorf("crowded tree broadcast costs %g, want %g", got, want)
	}
	// Linear broadcast: p-1 messages one after another, and one wake-up of
	// the p-Cores ranks beyond the cores.
	for _, mm := range []Model{m, goldenModel} {
		a := mm.Local.Alpha
		beta := mm.Local.Beta
		if mm.Cores < p {
			beta *= CrowdedCopy
		}
		want := float64(p-1)*(a+n*beta) + mm.Wake*float64(max(0, p-mm.Cores))
		if got := mm.Cost(Broadcast, Linear, p, int(n), lay); math.Abs(got-want) > 1e-9*want {
			t.Errorf("cores %d: linear broadcast costs %g, want %g", mm.Cores, got, want)
		}
	}
}

// TestCostCrowdedWork: on one host with more ranks than cores, no
// collective costs less than its messages times two alphas over the
// cores; with cores to spare, on several hosts, and for the Shared
// algorithms, the rounds alone count.
func TestCostCrowdedWork(t *testing.T) {
	m := oversubscribed()
	a := m.Local.Alpha
	floor := func(msgs float64) float64 { return msgs * 2 * a / float64(m.Cores) }
	for _, tt := range []struct {
		coll Collective
		algo Algo
		p    int
		msgs float64
	}{
		{AllGather, Linear, 8, 56},
		{AllGather, RecursiveDoubling, 8, 24},
		{AllGather, Ring, 4, 12},
		{ReduceScatter, Rabenseifner, 8, 24},
		{AllReduce, Ring, 4, 24},
		{AllReduce, Tree, 8, 14},
		{AllReduce, RecursiveDoubling, 6, 4*2 + 4}, // 4 ranks double, 2 fold in and out
		{AllReduce, Rabenseifner, 8, 48},
		{AllReduce, Linear, 8, 14},
		{Broadcast, Linear, 8, 7},
		{Barrier, RecursiveDoubling, 8, 24},
		{AllToAll, Linear, 4, 12},
	} {
		if got := messages(tt.coll, tt.algo, tt.p); got != tt.msgs {
			t.Errorf("%s %s p=%d: %g messages, want %g", tt.coll, tt.algo, tt.p, got, tt.msgs)
		}
		lay := Uniform(1, tt.p)
		s := shapeOf(tt.p, fit(tt.p, lay))
		rounds := m.rounds(tt.coll, tt.algo, s, 8)
		want := max(rounds, floor(tt.msgs))
		if got := m.Cost(tt.coll, tt.algo, tt.p, 8, lay); math.Abs(got-want) > 1e-9*want {
			t.Errorf("%s %s p=%d, 8 B: cost %g, want %g (rounds %g)", tt.coll, tt.algo, tt.p, got, want, rounds)
		}
	}
	for _, algo := range []Algo{Shared, Hierarchical} {
		if got := messages(AllReduce, algo, 8); got != 0 {
			t.Errorf("%s all-reduce: %g messages, want none counted", algo, got)
		}
	}
	// The bound decides where the rounds price a burst too low: 56
	// messages of the linear all-gather at np 8 against 24 of doubling.
	lay := Uniform(1, 8)
	if lin, dbl := m.Cost(AllGather, Linear, 8, 64, lay), m.Cost(AllGather, RecursiveDoubling, 8, 64, lay); lin < floor(56) || lin <= dbl {
		t.Errorf("crowded all-gather of 64 B at np 8: linear %g, doubling %g; want linear >= %g and above doubling", lin, dbl, floor(56))
	}
	// Nowhere else.
	for _, tt := range []struct {
		name string
		m    Model
		lay  Layout
		algo Algo
	}{
		{"cores to spare", goldenModel, Uniform(1, 8), Linear},
		{"two hosts", m, Uniform(2, 4), Linear},
		{"shared", m, sharedLayout(Uniform(1, 8)), Shared},
	} {
		p := len(tt.lay.Hosts) * len(tt.lay.Hosts[0])
		s := shapeOf(p, fit(p, tt.lay))
		if got, want := tt.m.Cost(AllGather, tt.algo, p, 64, tt.lay), tt.m.rounds(AllGather, tt.algo, s, 64); got != want {
			t.Errorf("%s: all-gather of 64 B costs %g, want its rounds' %g", tt.name, got, want)
		}
	}
}

func sharedLayout(l Layout) Layout {
	l.Shared = true
	return l
}

func TestCostRules(t *testing.T) {
	m := goldenModel
	if c := m.Cost(AllReduce, Hierarchical, 8, 1<<20, Uniform(1, 8)); !math.IsInf(c, 1) {
		t.Errorf("hierarchical on one host costs %g, want +Inf", c)
	}
	if c := m.Cost(AllReduce, Hierarchical, 8, 1<<20, Uniform(2, 4)); math.IsInf(c, 0) || c <= 0 {
		t.Errorf("hierarchical on 2 hosts of 4 costs %g", c)
	}
	if c := m.Cost(AllToAll, Tree, 8, 1<<20, Uniform(1, 8)); !math.IsInf(c, 1) {
		t.Errorf("a tree all-to-all costs %g, want +Inf", c)
	}
	// Folding: 5 ranks pay more than 4 for recursive doubling.
	if c4, c5 := m.Cost(AllReduce, RecursiveDoubling, 4, 1<<10, Layout{}), m.Cost(AllReduce, RecursiveDoubling, 5, 1<<10, Layout{}); c5 <= c4 {
		t.Errorf("recursive doubling on 5 ranks %g, not above 4 ranks %g", c5, c4)
	}
	// Crossing hosts costs the remote link.
	one, two := m.Cost(AllReduce, Ring, 8, 1<<20, Uniform(1, 8)), m.Cost(AllReduce, Ring, 8, 1<<20, Uniform(2, 4))
	if two <= one {
		t.Errorf("ring on 2 hosts %g, not above one host %g", two, one)
	}
	// Sharing two cores among 8 busy ranks slows the ring down.
	if over := oversubscribed().Cost(AllReduce, Ring, 8, 1<<20, Uniform(1, 8)); over <= one {
		t.Errorf("ring on 2 cores %g, not above 8 cores %g", over, one)
	}
	// A root whose receivers copy out of its memory sends to all at once:
	// linear beats the binomial tree inside a host from the single-copy
	// size, and is priced as before below it and across hosts.
	pm := pulling()
	for _, n := range []int{1 << 20, 64 << 20} {
		lin, tree := pm.Cost(Broadcast, Linear, 4, n, Uniform(1, 4)), pm.Cost(Broadcast, Tree, 4, n, Uniform(1, 4))
		if lin >= tree {
			t.Errorf("pulled linear broadcast of %d bytes at np 4 costs %g, not below the tree's %g", n, lin, tree)
		}
		if old := oversubscribed().Cost(Broadcast, Linear, 4, n, Uniform(1, 4)); lin >= old {
			t.Errorf("pulled linear broadcast %g, not below pushed %g", lin, old)
		}
	}
	for _, c := range []struct {
		n   int
		lay Layout
	}{{64 << 10, Uniform(1, 4)}, {1 << 20, Uniform(2, 2)}} {
		if a, b := pm.Cost(Broadcast, Linear, 4, c.n, c.lay), oversubscribed().Cost(Broadcast, Linear, 4, c.n, c.lay); a != b {
			t.Errorf("linear broadcast of %d bytes on %v: %g with single copy, %g without", c.n, c.lay.Hosts, a, b)
		}
	}
	for _, coll := range Collectives {
		if c := m.Cost(coll, Algos(coll)[0], 1, 1<<20, Layout{}); c != 0 {
			t.Errorf("%s on one rank costs %g", coll, c)
		}
	}
}

func TestTableCovers(t *testing.T) {
	for _, coll := range Collectives {
		tab := goldenModel.Table(coll, 6, Uniform(3, 2))
		if tab[0].From != TableMin || tab[len(tab)-1].To != TableMax {
			t.Errorf("%s table %v does not span %d..%d", coll, tab, TableMin, TableMax)
		}
		for i := 1; i < len(tab); i++ {
			if tab[i].From != 2*tab[i-1].To || tab[i].Algo == tab[i-1].Algo {
				t.Errorf("%s table %v: ranges %d and %d do not follow on", coll, tab, i-1, i)
			}
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
	lay := Uniform(1, 8)
	lay.Shared = true
	for _, n := range []int{8, 2 << 10, SharedCell} {
		if sh, lin := m.Cost(Broadcast, Shared, 8, n, lay), m.Cost(Broadcast, Linear, 8, n, lay); sh >= lin {
			t.Errorf("shared broadcast of %d bytes at np 8 on 2 cores costs %g, not below linear's %g", n, sh, lin)
		}
	}
	chunk, more := m.Cost(Broadcast, Shared, 8, SharedChunk, lay), m.Cost(Broadcast, Shared, 8, SharedChunk+8, lay)
	if more-chunk >= SharedLatency*m.Wake {
		t.Errorf("a shared broadcast's second chunk costs %g, a crowded round's wait (one chunk: %g)", more-chunk, chunk)
	}
}

// tcpCrowded is the model gorun --topo fitted over TCP with 4 ranks on 2
// cores for bench/results/choice/tcp-e (topo.4.txt).
func tcpCrowded() Model {
	return Model{
		Local:  Link{Alpha: 9.61e-6, Beta: 0.3031e-9},
		Remote: Link{Alpha: 50e-6, Beta: 0.9091e-9},
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
		lay := Uniform(1, p)
		for _, tt := range []struct {
			bytes int
			want  Algo
		}{{8, Linear}, {4 << 10, Linear}, {256 << 10, Linear}, {2 << 20, Ring}, {8 << 20, Ring}} {
			if got := m.Choose(AllReduce, p, tt.bytes, lay); got != tt.want {
				t.Errorf("np %d, %d B: chose %s, want %s (linear %.0f us, ring %.0f us)", p, tt.bytes, got, tt.want,
					1e6*m.Cost(AllReduce, Linear, p, tt.bytes, lay), 1e6*m.Cost(AllReduce, Ring, p, tt.bytes, lay))
			}
		}
	}
	spare := m
	spare.Cores = 8
	if got := spare.Choose(AllReduce, 4, 8, Uniform(1, 4)); got != RecursiveDoubling {
		t.Errorf("4 ranks on 8 cores, 8 B: chose %s, want recdbl", got)
	}
}
