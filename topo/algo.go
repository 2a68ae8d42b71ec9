package topo

import (
	"fmt"
	"strings"
)

// Collective names one collective operation.
type Collective int

// The collectives, whose algorithms package prims implements and chooses.
const (
	Broadcast Collective = iota
	Reduce
	AllReduce
	Gather
	Scatter
	AllGather
	ReduceScatter
	AllToAll
	Barrier
)

// Collectives lists every Collective in declaration order.
var Collectives = []Collective{Broadcast, Reduce, AllReduce, Gather, Scatter, AllGather, ReduceScatter, AllToAll, Barrier}

var collectiveNames = [...]string{
	Broadcast:     "broadcast",
	Reduce:        "reduce",
	AllReduce:     "allreduce",
	Gather:        "gather",
	Scatter:       "scatter",
	AllGather:     "allgather",
	ReduceScatter: "reducescatter",
	AllToAll:      "alltoall",
	Barrier:       "barrier",
}

// String returns the collective's lower-case name, as collbench's --op takes it.
func (c Collective) String() string {
	if c < 0 || int(c) >= len(collectiveNames) {
		return fmt.Sprintf("Collective(%d)", int(c))
	}
	return collectiveNames[c]
}

// ParseCollective parses a name that String returns.
func ParseCollective(s string) (Collective, error) {
	for i, n := range collectiveNames {
		if n == s {
			return Collective(i), nil
		}
	}
	return 0, fmt.Errorf("unknown collective %q: want one of %s", s, strings.Join(collectiveNames[:], ", "))
}

// Algo names a collective algorithm; its value is the name GORUN_ALGO and
// collbench's --algo take. Package prims implements them, and says which
// apply to which collective (prims.Algos).
type Algo string

// The algorithms. Not every algorithm applies to every collective: see prims.Algos.
const (
	Ring              Algo = "ring"         // ring (pipelined chain for one-to-all and all-to-one)
	Tree              Algo = "tree"         // binomial tree
	RecursiveDoubling Algo = "recdbl"       // recursive doubling (dissemination for barrier)
	Rabenseifner      Algo = "rabenseifner" // recursive-halving reduce-scatter, then recursive-doubling gather
	Hierarchical      Algo = "hier"         // inside each host, across hosts, inside again
	Linear            Algo = "linear"       // direct: the root talks to every rank, or every pair talks
	Shared            Algo = "shared"       // one host: every rank publishes its part in shared memory and reads the others'
)

// AllAlgos lists every algorithm, in the order the documentation gives them.
var AllAlgos = []Algo{Ring, Tree, RecursiveDoubling, Rabenseifner, Hierarchical, Linear, Shared}

// ParseAlgo parses an algorithm's name.
func ParseAlgo(s string) (Algo, error) {
	for _, a := range AllAlgos {
		if string(a) == s {
			return a, nil
		}
	}
	return "", fmt.Errorf("unknown algorithm %q: want one of %s", s, algoList(AllAlgos))
}

func algoList(as []Algo) string {
	names := make([]string, len(as))
	for i, a := range as {
		names[i] = string(a)
	}
	return strings.Join(names, ", ")
}
