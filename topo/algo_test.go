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
	}
	if _, err := ParseCollective("allreduc"); err == nil {
		t.Error("ParseCollective(allreduc) succeeded")
	}
}
