package topo_test

import (
	"fmt"

	"github.com/gorun-hpc/gorun/topo"
)

// A model with fixed constants prices messages on machines it is not
// running on: here a round of 1 MiB between two ranks of one host, and of
// two hosts linked by a network four times slower than a host's loopback.
// prims.Cheapest adds such rounds up, algorithm by algorithm, to choose.
func ExampleModel_Step() {
	m := topo.Model{
		Local:  topo.Link{Alpha: 10e-6, Beta: 1 / 2.5e9},
		Remote: topo.Link{Alpha: 40e-6, Beta: 1 / 0.6e9},
		Gamma:  1 / 5e9,
		Cores:  8,
	}
	for _, hosts := range []int{1, 2} {
		s := topo.ShapeOf(2, topo.Uniform(hosts, 2/hosts))
		fmt.Printf("2 ranks on %d host(s): %.0f us\n", s.Hosts, 1e6*m.Step(s, s.Hosts > 1, 1<<20, 0, 2, 0))
	}
	// Output:
	// 2 ranks on 1 host(s): 429 us
	// 2 ranks on 2 host(s): 1788 us
}
