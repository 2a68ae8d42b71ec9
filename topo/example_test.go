package topo_test

import (
	"fmt"

	"github.com/gorun-hpc/gorun/topo"
)

// A model with fixed constants answers for machines it is not running on:
// here 2 hosts of 4 ranks, linked by a network four times slower than a
// host's loopback.
func ExampleModel_Choose() {
	m := topo.Model{
		Local:  topo.Link{Alpha: 10e-6, Beta: 1 / 2.5e9},
		Remote: topo.Link{Alpha: 40e-6, Beta: 1 / 0.6e9},
		Gamma:  1 / 5e9,
		Cores:  8,
	}
	lay := topo.Uniform(2, 4)
	for _, n := range []int{8, 64 << 10, 64 << 20} {
		fmt.Printf("allreduce of %s: %s\n", topo.Size(n), m.Choose(topo.AllReduce, 8, n, lay))
	}
	// Output:
	// allreduce of 8 B: recdbl
	// allreduce of 64 KiB: rabenseifner
	// allreduce of 64 MiB: hier
}
