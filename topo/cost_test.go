package topo

import (
	"math"
	"testing"
)

// The building blocks that prims' algorithms price their rounds with; the
// algorithms' costs are tested in prims.

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Abs(b) }

// TestStep: with cores to spare, a round is alpha + bytes beta + reduced
// bytes gamma over its link class; on a crowded host its bytes cost the
// busy endpoints' share of the cores, CrowdedCopy more, and its latency a
// wake-up per busy rank beyond the cores; a pulled message is copied by
// its receiver alone, and one through the rings twice where the link's
// beta is a pulled copy's.
func TestStep(t *testing.T) {
	m := goldenModel
	one, two := ShapeOf(4, Uniform(1, 4)), ShapeOf(4, Uniform(2, 2))
	if got, want := m.Step(one, false, 1000, 500, 2, 1), m.Local.Alpha+1000*m.Local.Beta+500*m.Gamma; !near(got, want) {
		t.Errorf("local step %g, want %g", got, want)
	}
	if got, want := m.Step(two, true, 1000, 0, 2, 0), m.Remote.Time(1000); !near(got, want) {
		t.Errorf("remote step %g, want %g", got, want)
	}
	c := pulling()
	crowded := ShapeOf(8, Uniform(1, 8))
	if got, want := c.Step(crowded, false, 1000, 0, 8, 0), c.Local.Alpha+6*c.Wake+2*1000*c.Local.Beta*8/2*CrowdedCopy; !near(got, want) {
		t.Errorf("crowded step %g, want %g (two copies of the pulled beta)", got, want)
	}
	if got, want := c.Step(crowded, false, 1<<20, 0, 8, 0), c.Local.Alpha+6*c.Wake+(1<<20)*c.Local.Beta*4/2*CrowdedCopy; !near(got, want) {
		t.Errorf("crowded pulled step %g, want %g (half the endpoints copy)", got, want)
	}
	for _, k := range []struct {
		m     Model
		cross bool
		b     float64
		want  float64
	}{
		{c, false, 1000, 2},           // through the rings, beta fitted to pulled copies
		{c, false, 1 << 20, 1},        // pulled
		{c, true, 1000, 1},            // across hosts
		{goldenModel, false, 1000, 1}, // no single copy: beta fitted to the rings
		{func() Model { x := c; x.Local.Pull = 4 << 20; return x }(), false, 1 << 20, 1}, // the probe's sizes not pulled
	} {
		if got := k.m.Copies(k.cross, k.b); got != k.want {
			t.Errorf("Copies(cross %v, %g B) with pull %g = %g, want %g", k.cross, k.b, k.m.Local.Pull, got, k.want)
		}
	}
}

// TestBurst: p-1 messages posted at once pay one latency, BurstGap of it
// for each further one, and their bytes twice (each rank copies its own
// in and the others' out), once where the receiver pulls them; past
// Overlap bytes, a message in one piece pays beta again.
func TestBurst(t *testing.T) {
	m := goldenModel
	m.Cores = 1 << 20
	s := ShapeOf(4, Uniform(1, 4))
	a, b := m.Local.Alpha, m.Local.Beta
	for _, n := range []float64{1000, 4 * Overlap} {
		want := a + 2*BurstGap*a + 3*(2*n*b+max(0, n-Overlap)*b)
		if got := m.Burst(s, n, 0); !near(got, want) {
			t.Errorf("burst of %g bytes: %g, want %g", n, got, want)
		}
	}
	m.Local.Pull = 1 << 10
	if got, want := m.Burst(s, 4*Overlap, 0), a+2*BurstGap*a+3*4*Overlap*b; !near(got, want) {
		t.Errorf("burst of pulled messages: %g, want %g", got, want)
	}
}

// TestRound: a message round on one host costs at least the measured
// Round; a round across hosts and a Shared algorithm's handoff do not.
func TestRound(t *testing.T) {
	m := goldenModel
	m.Cores = 16
	m.Round = 4 * m.Local.Alpha
	s := ShapeOf(8, Uniform(1, 8))
	if got := m.AlphaBusy(s, false, 16); got != m.Round {
		t.Errorf("local round: %g, want Round %g", got, m.Round)
	}
	if got := m.AlphaBusy(s, true, 16); got != m.Remote.Alpha {
		t.Errorf("remote round: %g, want %g", got, m.Remote.Alpha)
	}
	if got := m.Handoff(s, 8); got != m.Local.Alpha {
		t.Errorf("handoff: %g, want the local alpha %g", got, m.Local.Alpha)
	}
	m.Round = m.Local.Alpha / 2 // never below the ping-pong's alpha
	if got := m.AlphaBusy(s, false, 16); got != m.Local.Alpha {
		t.Errorf("local round under alpha: %g, want %g", got, m.Local.Alpha)
	}
}

// TestCrowdedWork: only one host with more ranks than cores bounds a
// collective by its messages.
func TestCrowdedWork(t *testing.T) {
	m := oversubscribed()
	if got, want := m.CrowdedWork(ShapeOf(8, Uniform(1, 8)), 24), 24*2*m.Local.Alpha/2; !near(got, want) {
		t.Errorf("crowded host: %g, want %g", got, want)
	}
	for _, s := range []Shape{ShapeOf(8, Uniform(2, 4)), ShapeOf(2, Uniform(1, 2))} {
		if got := m.CrowdedWork(s, 24); got != 0 {
			t.Errorf("%d ranks on %d hosts of %d cores: %g, want 0", s.P, s.Hosts, m.Cores, got)
		}
	}
}

// TestShapeOf: a layout of another size stands for one host.
func TestShapeOf(t *testing.T) {
	if s := ShapeOf(6, Uniform(3, 2)); s.Hosts != 3 || s.PerHost != 2 {
		t.Errorf("ShapeOf(6, 3x2) = %+v", s)
	}
	if s := ShapeOf(6, Layout{}); s.P != 6 || s.Hosts != 1 || s.PerHost != 6 || s.Layout.Size() != 6 {
		t.Errorf("ShapeOf(6, zero layout) = %+v", s)
	}
}

// TestCrosses: which rounds of recursive doubling and of a binomial tree
// cross hosts.
func TestCrosses(t *testing.T) {
	for _, tt := range []struct {
		name      string
		lay       Layout
		xor, tree []bool
	}{
		{"2x4", Uniform(2, 4), []bool{false, false, true}, []bool{false, false, true}},
		{"cyclic", FromHostIDs([]string{"a", "b", "a", "b"}), []bool{true, false}, []bool{true, false}},
		{"one host", Uniform(1, 5), []bool{false, false, false}, []bool{false, false, false}},
	} {
		for k := range tt.xor {
			if got := tt.lay.XorCrosses(k); got != tt.xor[k] {
				t.Errorf("%s: XorCrosses(%d) = %v", tt.name, k, got)
			}
			if got := tt.lay.TreeCrosses(k); got != tt.tree[k] {
				t.Errorf("%s: TreeCrosses(%d) = %v", tt.name, k, got)
			}
		}
	}
}
