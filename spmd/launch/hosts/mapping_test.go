package hosts

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// hostsOf builds hosts from "slots[/max]" specs: "2", "2/3".
func hostsOf(specs ...string) []Host {
	var hs []Host
	for i, s := range specs {
		h := Host{Name: fmt.Sprintf("n%d", i)}
		fmt.Sscanf(strings.Replace(s, "/", " ", 1), "%d %d", &h.Slots, &h.MaxSlots)
		hs = append(hs, h)
	}
	return hs
}

// layout is the host index of each rank, e.g. "0 0 1 1".
func layout(ps []Placement) string {
	var b []string
	for _, p := range ps {
		b = append(b, fmt.Sprint(p.HostIndex))
	}
	return strings.Join(b, " ")
}

func TestMap(t *testing.T) {
	tests := []struct {
		name  string
		hosts []Host
		np    int
		opt   MapOptions
		want  string
	}{
		{"by slot fills hosts", hostsOf("2", "2", "2"), 6, MapOptions{}, "0 0 1 1 2 2"},
		{"by slot partial", hostsOf("2", "2", "2"), 3, MapOptions{}, "0 0 1"},
		{"by slot uneven", hostsOf("3", "1"), 4, MapOptions{}, "0 0 0 1"},
		{"np 0 is one per slot", hostsOf("2", "1"), 0, MapOptions{}, "0 0 1"},
		{"by node", hostsOf("2", "2", "2"), 6, MapOptions{Policy: ByNode}, "0 1 2 0 1 2"},
		{"by node partial", hostsOf("2", "2", "2"), 4, MapOptions{Policy: ByNode}, "0 1 2 0"},
		{"by node skips full hosts", hostsOf("1", "3"), 4, MapOptions{Policy: ByNode}, "0 1 1 1"},
		{"oversubscribe by slot wraps", hostsOf("2", "2", "2"), 8, MapOptions{Oversubscribe: true}, "0 0 0 1 1 1 2 2"},
		{"oversubscribe by node wraps", hostsOf("1", "1"), 5, MapOptions{Policy: ByNode, Oversubscribe: true}, "0 1 0 1 0"},
		{"oversubscribe respects max", hostsOf("1/1", "1/4"), 4, MapOptions{Oversubscribe: true}, "0 1 1 1"},
		{"oversubscribe by node respects max", hostsOf("1/2", "1"), 5, MapOptions{Policy: ByNode, Oversubscribe: true}, "0 1 0 1 1"},
		{"npernode", hostsOf("4", "4", "4"), 0, MapOptions{NPerNode: 2}, "0 0 1 1 2 2"},
		{"npernode partial", hostsOf("4", "4", "4"), 5, MapOptions{NPerNode: 2}, "0 0 1 1 2"},
		{"npernode by node", hostsOf("4", "4"), 4, MapOptions{NPerNode: 2, Policy: ByNode}, "0 1 0 1"},
		{"npernode oversubscribed", hostsOf("1", "1"), 0, MapOptions{NPerNode: 2, Oversubscribe: true}, "0 0 1 1"},
		{"zero-slot host with oversubscribe", hostsOf("0", "1"), 2, MapOptions{Oversubscribe: true}, "0 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Map(tt.hosts, tt.np, tt.opt)
			if err != nil {
				t.Fatalf("Map: %v", err)
			}
			if l := layout(got); l != tt.want {
				t.Errorf("Map layout = %q, want %q", l, tt.want)
			}
			checkPlacements(t, got, len(tt.hosts))
		})
	}
}

// checkPlacements checks the invariants every mapping must keep.
func checkPlacements(t *testing.T, ps []Placement, nhosts int) {
	t.Helper()
	size := map[int]int{}
	for _, p := range ps {
		size[p.HostIndex]++
	}
	seen := map[int][]int{}
	nodeOf := map[int]int{}
	for r, p := range ps {
		if p.Rank != r {
			t.Errorf("placement %d has rank %d", r, p.Rank)
		}
		if p.HostIndex < 0 || p.HostIndex >= nhosts {
			t.Fatalf("rank %d on host %d of %d", r, p.HostIndex, nhosts)
		}
		if p.LocalRank != len(seen[p.HostIndex]) || p.LocalSize != size[p.HostIndex] {
			t.Errorf("rank %d: local %d/%d, want %d/%d", r, p.LocalRank, p.LocalSize, len(seen[p.HostIndex]), size[p.HostIndex])
		}
		seen[p.HostIndex] = append(seen[p.HostIndex], r)
		if p.NodeCount != len(size) {
			t.Errorf("rank %d: node count %d, want %d", r, p.NodeCount, len(size))
		}
		nodeOf[p.HostIndex] = p.NodeRank
	}
	// Node ranks number the used hosts 0..k-1 in host order.
	next := 0
	for h := 0; h < nhosts; h++ {
		if n, ok := nodeOf[h]; ok {
			if n != next {
				t.Errorf("host %d has node rank %d, want %d", h, n, next)
			}
			next++
		}
	}
}

func TestMapNodeRanksSkipUnusedHosts(t *testing.T) {
	got, err := Map(hostsOf("2", "2", "2"), 3, MapOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := []Placement{
		{Rank: 0, HostIndex: 0, LocalRank: 0, LocalSize: 2, NodeRank: 0, NodeCount: 2},
		{Rank: 1, HostIndex: 0, LocalRank: 1, LocalSize: 2, NodeRank: 0, NodeCount: 2},
		{Rank: 2, HostIndex: 1, LocalRank: 0, LocalSize: 1, NodeRank: 1, NodeCount: 2},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Map =\n%+v\nwant\n%+v", got, want)
	}
}

func TestMapErrors(t *testing.T) {
	tests := []struct {
		name  string
		hosts []Host
		np    int
		opt   MapOptions
		want  string
		err   error
	}{
		{"not enough slots", hostsOf("2", "2", "2"), 8, MapOptions{},
			"8 ranks requested but the host list has 6 slots on 3 hosts; add slots, or pass --oversubscribe", ErrNotEnoughSlots},
		{"by node not enough", hostsOf("1"), 2, MapOptions{Policy: ByNode}, "2 ranks requested but the host list has 1 slot on 1 host", ErrNotEnoughSlots},
		{"max slots", hostsOf("1/2", "1/2"), 5, MapOptions{Oversubscribe: true},
			"5 ranks requested but max_slots allows at most 4 on 2 hosts", ErrMaxSlots},
		{"no hosts", nil, 1, MapOptions{}, "no hosts", ErrNoHosts},
		{"negative np", hostsOf("1"), -1, MapOptions{}, "-1 ranks requested", ErrSyntax},
		{"no slots", hostsOf("0"), 0, MapOptions{}, "no slots", ErrNotEnoughSlots},
		{"npernode above slots", hostsOf("4", "1"), 0, MapOptions{NPerNode: 2}, "on host n1", ErrNotEnoughSlots},
		{"npernode above max", hostsOf("1/1"), 0, MapOptions{NPerNode: 2, Oversubscribe: true}, "max_slots allows at most 1", ErrMaxSlots},
		{"npernode too few hosts", hostsOf("2", "2"), 5, MapOptions{NPerNode: 2}, "2 per node on 2 hosts places 4", ErrNotEnoughSlots},
		{"npernode negative", hostsOf("2"), 0, MapOptions{NPerNode: -1}, "ranks per node", ErrSyntax},
		{"bad policy", hostsOf("2"), 0, MapOptions{Policy: 7}, "unknown policy", ErrSyntax},
		{"too many ranks", hostsOf("1"), MaxSlots + 1, MapOptions{Oversubscribe: true}, "at most", ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Map(tt.hosts, tt.np, tt.opt)
			if !errors.Is(err, tt.err) {
				t.Fatalf("Map = %v, want %v", err, tt.err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
	var se *SlotsError
	_, err := Map(hostsOf("2", "2", "2"), 8, MapOptions{})
	if !errors.As(err, &se) || se.Requested != 8 || se.Slots != 6 || se.Hosts != 3 {
		t.Errorf("errors.As(*SlotsError) = %+v from %v", se, err)
	}
}

func TestParsePolicy(t *testing.T) {
	for in, want := range map[string]Policy{"slot": BySlot, "SLOT": BySlot, "node": ByNode, " Node ": ByNode} {
		got, err := ParsePolicy(in)
		if err != nil || got != want {
			t.Errorf("ParsePolicy(%q) = %v, %v; want %v", in, got, err, want)
		}
		if back, _ := ParsePolicy(got.String()); back != got {
			t.Errorf("ParsePolicy(%v.String()) = %v", got, back)
		}
	}
	_, err := ParsePolicy("core")
	if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), `"core"; choose slot or node`) {
		t.Errorf("ParsePolicy(core) = %v", err)
	}
}

func ExampleMap() {
	hosts, err := ParseHostfile("hostfile", strings.NewReader("node1 slots=2\nnode2 slots=2\n"))
	if err != nil {
		panic(err)
	}
	// np 0 would mean one rank per slot; 3 leaves a slot free.
	placements, err := Map(hosts, 3, MapOptions{Policy: BySlot})
	if err != nil {
		panic(err)
	}
	for _, p := range placements {
		fmt.Printf("rank %d on %s: local %d/%d, node %d/%d\n",
			p.Rank, hosts[p.HostIndex].Name, p.LocalRank, p.LocalSize, p.NodeRank, p.NodeCount)
	}
	// Output:
	// rank 0 on node1: local 0/2, node 0/2
	// rank 1 on node1: local 1/2, node 0/2
	// rank 2 on node2: local 0/1, node 1/2
}
