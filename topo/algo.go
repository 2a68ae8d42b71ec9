package topo

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/gorun-hpc/gorun/spmd/contract"

	"github.com/gorun-hpc/gorun/spmd"
)

// Collective names one collective operation.
type Collective int

// The collectives whose algorithm topo chooses.
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
// collbench's --algo take.
type Algo string

// The algorithms. Not every algorithm applies to every collective: see Algos.
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

// applicable lists, per collective, the algorithms that implement it.
var applicable = [...][]Algo{
	Broadcast:     {Tree, Ring, Linear, Hierarchical, Shared},
	Reduce:        {Tree, Ring, Rabenseifner, Linear, Hierarchical},
	AllReduce:     {Ring, Tree, RecursiveDoubling, Rabenseifner, Linear, Hierarchical, Shared},
	Gather:        {Linear, Tree},
	Scatter:       {Linear, Tree},
	AllGather:     {Ring, RecursiveDoubling, Linear, Hierarchical, Shared},
	ReduceScatter: {Ring, Rabenseifner, Linear, Shared},
	AllToAll:      {Linear, Shared},
	Barrier:       {RecursiveDoubling, Tree, Shared},
}

// Algos returns the algorithms that apply to coll. The caller must not
// modify the slice.
func Algos(coll Collective) []Algo {
	if coll < 0 || int(coll) >= len(applicable) {
		return nil
	}
	return applicable[coll]
}

// Applies reports whether algo implements coll.
func Applies(coll Collective, algo Algo) bool {
	for _, a := range Algos(coll) {
		if a == algo {
			return true
		}
	}
	return false
}

// Forced returns the algorithm GORUN_ALGO forces for coll, or "" when it is
// not set. The value is one algorithm name for every collective ("ring"),
// or a comma-separated list of collective=algorithm pairs
// ("allreduce=ring,broadcast=tree") that leaves the other collectives to
// the model. A name that is unknown or does not apply to coll is an error.
func Forced(coll Collective) (Algo, error) {
	return forced(os.Getenv(contract.EnvAlgo), coll)
}

func forced(v string, coll Collective) (Algo, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return "", nil
	}
	name := v
	if strings.Contains(v, "=") {
		name = ""
		for _, pair := range strings.Split(v, ",") {
			k, a, ok := strings.Cut(strings.TrimSpace(pair), "=")
			if !ok {
				return "", fmt.Errorf("%s=%q: %q is not collective=algorithm", contract.EnvAlgo, v, pair)
			}
			if _, err := ParseCollective(k); err != nil {
				return "", fmt.Errorf("%s=%q: %w", contract.EnvAlgo, v, err)
			}
			if k == coll.String() {
				name = a
			}
		}
		if name == "" {
			return "", nil
		}
	}
	a, err := ParseAlgo(name)
	if err != nil {
		return "", fmt.Errorf("%s=%q: %w", contract.EnvAlgo, v, err)
	}
	if !Applies(coll, a) {
		return "", fmt.Errorf("%s=%q: %s does not implement %s; for %s use one of %s",
			contract.EnvAlgo, v, a, coll, coll, algoList(Algos(coll)))
	}
	return a, nil
}

// Choose returns the algorithm for one call of coll on c: the one
// GORUN_ALGO forces when it is set, else the cheapest under the fitted
// model for c's size and host layout.
//
// bytes is the size of the whole buffer of the call, as nccl-tests counts
// it: the buffer of Broadcast, Reduce and AllReduce; the gathered result of
// Gather and AllGather (all p blocks); the whole input of Scatter and
// ReduceScatter; one rank's send buffer of AllToAll; 0 for Barrier.
//
// The first time a communicator (or the one it was split from) needs a
// model, Choose probes its links collectively over c and caches the model
// with c.SetValue; that first call must be made by every rank of c, in the
// same order as their other collective calls, like any collective. Every
// rank gets the same answer for the same call: the fitted constants are
// rank 0's, broadcast to all.
func Choose(ctx context.Context, c *spmd.Comm, coll Collective, bytes int) (Algo, error) {
	if a, err := Forced(coll); a != "" || err != nil {
		return a, err
	}
	if !Applies(coll, Ring) && len(Algos(coll)) == 1 {
		return Algos(coll)[0], nil
	}
	m, err := ModelFor(ctx, c)
	if err != nil {
		return "", fmt.Errorf("choosing a %s algorithm on comm %d: %w", coll, c.ID(), err)
	}
	return m.Choose(coll, c.Size(), bytes, LayoutOf(c)), nil
}
