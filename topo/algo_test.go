package topo

import (
	"strings"
	"testing"
)

func TestParseAlgo(t *testing.T) {
	for _, a := range AllAlgos {
		got, err := ParseAlgo(string(a))
		if err != nil || got != a {
			t.Errorf("ParseAlgo(%q) = %q, %v", a, got, err)
		}
	}
	_, err := ParseAlgo("bogus")
	if err == nil || !strings.Contains(err.Error(), "ring, tree, recdbl, rabenseifner, hier, linear") {
		t.Errorf("ParseAlgo(bogus) error %v does not list the names", err)
	}
}

func TestCollectiveNames(t *testing.T) {
	for _, c := range Collectives {
		got, err := ParseCollective(c.String())
		if err != nil || got != c {
			t.Errorf("ParseCollective(%q) = %v, %v", c, got, err)
		}
		if len(Algos(c)) == 0 {
			t.Errorf("%s has no algorithms", c)
		}
	}
	if _, err := ParseCollective("allreduc"); err == nil {
		t.Error("ParseCollective(allreduc) succeeded")
	}
}

func TestForced(t *testing.T) {
	tests := []struct {
		name, env string
		coll      Collective
		want      Algo
		err       string
	}{
		{"unset", "", AllReduce, "", ""},
		{"one for all", "ring", AllReduce, Ring, ""},
		{"not applicable", "ring", Barrier, "", "ring does not implement barrier; for barrier use one of recdbl, tree"},
		{"unknown", "fast", AllReduce, "", `unknown algorithm "fast"`},
		{"pairs, this one", "allreduce=tree,broadcast=ring", Broadcast, Ring, ""},
		{"pairs, other one", "allreduce=tree", Broadcast, "", ""},
		{"pairs, bad collective", "allreduc=tree", AllReduce, "", `unknown collective "allreduc"`},
		{"pairs, bad pair", "allreduce=tree,ring", AllReduce, "", `"ring" is not collective=algorithm`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := forced(tt.env, tt.coll)
			if got != tt.want {
				t.Errorf("forced(%q, %s) = %q, want %q", tt.env, tt.coll, got, tt.want)
			}
			if (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Errorf("forced(%q, %s) error %v, want one containing %q", tt.env, tt.coll, err, tt.err)
			}
		})
	}
}
