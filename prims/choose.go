package prims

import (
	"context"
	"fmt"
	"math"
	"os"
	"strings"
	"time"

	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/contract"
	"github.com/gorun-hpc/gorun/topo"
)

// The choice of algorithm. Each algorithm prices itself beside its code
// (ringAllReduceCost beside ringAllReduce, sharedBcastCost beside
// sharedBcast, ...), round by round, with the constants topo measures and
// the building blocks it provides (topo.Model's Step, Burst, CrowdedWork,
// ...), and with the very constants that lay out its messages and its
// shared memory (SegmentBytes, sharedChunk, ...); each collective's file
// dispatches on the algorithm for its cost as for its run
// (allReduceCost beside allReduce). This file says which algorithms
// implement which collective and picks the cheapest.

// applicable lists, per collective, the algorithms that implement it; ties
// in cost go to the one listed first.
var applicable = [...][]topo.Algo{
	topo.Broadcast:     {topo.Tree, topo.Ring, topo.Linear, topo.Hierarchical, topo.Shared},
	topo.Reduce:        {topo.Tree, topo.Ring, topo.Rabenseifner, topo.Linear, topo.Hierarchical, topo.Shared},
	topo.AllReduce:     {topo.Ring, topo.Tree, topo.RecursiveDoubling, topo.Rabenseifner, topo.Linear, topo.Hierarchical, topo.Shared},
	topo.Gather:        {topo.Linear, topo.Tree, topo.Shared},
	topo.Scatter:       {topo.Linear, topo.Tree, topo.Shared},
	topo.AllGather:     {topo.Ring, topo.RecursiveDoubling, topo.Linear, topo.Hierarchical, topo.Shared},
	topo.ReduceScatter: {topo.Ring, topo.Rabenseifner, topo.Linear, topo.Shared},
	topo.AllToAll:      {topo.Linear, topo.Shared},
	topo.Barrier:       {topo.RecursiveDoubling, topo.Tree, topo.Shared},
}

// Algos returns the algorithms that implement coll. The caller must not
// modify the slice.
func Algos(coll topo.Collective) []topo.Algo {
	if coll < 0 || int(coll) >= len(applicable) {
		return nil
	}
	return applicable[coll]
}

// Applies reports whether algo implements coll.
func Applies(coll topo.Collective, algo topo.Algo) bool {
	for _, a := range Algos(coll) {
		if a == algo {
			return true
		}
	}
	return false
}

// Choose returns the algorithm for one call of coll on c: the one
// GORUN_ALGO forces when it is set, else the one measured fastest at that
// size by gorun --tune when the decision table of c's key has a rule for
// coll (rank 0's table: see TuneFilePath), else the cheapest under c's
// model (Cheapest) for c's size and host layout. Collectives call it for every
// call that WithAlgo does not force, and remember its answers per
// communicator.
//
// bytes is the size of the whole buffer of the call, as nccl-tests counts
// it: the buffer of Broadcast, Reduce and AllReduce; the gathered result of
// Gather and AllGather (all p blocks); the whole input of Scatter and
// ReduceScatter; one rank's send buffer of AllToAll; 0 for Barrier.
//
// The first call on each communicator is collective: rank 0 sends its
// decision table. So is the first time a communicator (or the one it was
// split from) needs a model, where the table has no rule for a call's
// collective: Choose probes its links over c (topo.ModelFor), 5-50 ms on
// the 2-core VM, which a job whose table decides all its calls never
// pays. Those calls must be made by every rank of c, in the same order as
// their other collective calls, like any collective; every rank gets the
// same table, and so the same answer for the same call.
func Choose(ctx context.Context, c *spmd.Comm, coll topo.Collective, bytes int) (topo.Algo, error) {
	if a, err := forced(coll); a != "" || err != nil {
		return a, err
	}
	if !Applies(coll, topo.Ring) && len(Algos(coll)) == 1 {
		return Algos(coll)[0], nil
	}
	t, err := tableFor(ctx, c)
	if err != nil {
		return "", fmt.Errorf("choosing the algorithm of %s on comm %d: %w", coll, c.ID(), err)
	}
	if a, ok := t.lookup(coll, bytes); ok {
		return a, nil
	}
	m, err := topo.ModelFor(ctx, c)
	if err != nil {
		return "", fmt.Errorf("choosing the algorithm of %s on comm %d: %w", coll, c.ID(), err)
	}
	return Cheapest(m, coll, c.Size(), bytes, topo.LayoutOf(c)), nil
}

// forced returns the algorithm GORUN_ALGO forces for coll, or "" when it
// is not set. The value is one algorithm name for every collective
// ("ring"), or a comma-separated list of collective=algorithm pairs
// ("allreduce=ring,broadcast=tree") that leaves the other collectives to
// the model. A name that is unknown or does not apply to coll is an error.
func forced(coll topo.Collective) (topo.Algo, error) {
	return parseForced(os.Getenv(contract.EnvAlgo), coll)
}

func parseForced(v string, coll topo.Collective) (topo.Algo, error) {
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
			if _, err := topo.ParseCollective(k); err != nil {
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
	a, err := topo.ParseAlgo(name)
	if err != nil {
		return "", fmt.Errorf("%s=%q: %w", contract.EnvAlgo, v, err)
	}
	if !Applies(coll, a) {
		return "", fmt.Errorf("%s=%q: %s does not implement %s; for %s use one of %s",
			contract.EnvAlgo, v, a, coll, coll, algoNames(coll))
	}
	return a, nil
}

// algoNames lists the algorithms that implement coll, for people.
func algoNames(coll topo.Collective) string {
	names := make([]string, 0, len(Algos(coll)))
	for _, a := range Algos(coll) {
		names = append(names, string(a))
	}
	return strings.Join(names, ", ")
}

// Cheapest returns the algorithm of coll with the lowest modelled cost
// under m on p ranks laid out as lay, moving bytes bytes (counted as
// Choose counts them); the zero Layout, or one of another size, stands for
// p ranks on one host. Ties go to the algorithm listed first by Algos. It
// answers for machines it is not running on.
func Cheapest(m topo.Model, coll topo.Collective, p, bytes int, lay topo.Layout) topo.Algo {
	s := topo.ShapeOf(p, lay)
	best, bestCost := topo.Algo(""), math.Inf(1)
	for _, a := range Algos(coll) {
		if c := modelled(m, coll, a, s, float64(bytes)); c < bestCost || best == "" {
			best, bestCost = a, c
		}
	}
	return best
}

// Cost returns the modelled seconds of one call of coll by algo under m
// on p ranks laid out as lay (as Cheapest takes them), moving bytes bytes:
// +Inf for an algorithm that does not implement coll, or does not apply
// to the ranks (Hierarchical on one host, say).
func Cost(m topo.Model, coll topo.Collective, algo topo.Algo, p, bytes int, lay topo.Layout) float64 {
	if !Applies(coll, algo) {
		return math.Inf(1)
	}
	return modelled(m, coll, algo, topo.ShapeOf(p, lay), float64(bytes))
}

// cheapestCost is the cost of the cheapest algorithm of coll other than
// Hierarchical: a phase of a hierarchical algorithm.
func cheapestCost(m topo.Model, coll topo.Collective, p int, n float64, lay topo.Layout) float64 {
	s := topo.ShapeOf(p, lay)
	b := math.Inf(1)
	for _, a := range Algos(coll) {
		if a != topo.Hierarchical {
			b = min(b, modelled(m, coll, a, s, n))
		}
	}
	return b
}

// estimate is what an algorithm costs on some ranks: the seconds its
// rounds add up to, and how many point-to-point messages it sends when
// its buffer is small (one segment a block), which on one host with more
// ranks than cores bound its time (topo.Model.CrowdedWork); none for the
// Shared algorithms, which send none.
type estimate struct {
	rounds, messages float64
}

// never is the estimate of an algorithm that does not apply.
var never = estimate{rounds: math.Inf(1)}

// modelled is the cost of coll by algo, which implements it, on the ranks
// of s, moving n bytes: its rounds, or the least time its messages take on
// a crowded host, whichever is more.
func modelled(m topo.Model, coll topo.Collective, algo topo.Algo, s topo.Shape, n float64) float64 {
	if s.P <= 1 {
		return 0
	}
	e := estimateOf(m, coll, algo, s, n)
	return max(e.rounds, m.CrowdedWork(s, e.messages))
}

// estimateOf is the estimate of coll by algo on the ranks of s, moving n
// bytes, as the collective's file prices it.
func estimateOf(m topo.Model, coll topo.Collective, algo topo.Algo, s topo.Shape, n float64) estimate {
	switch coll {
	case topo.AllReduce:
		return allReduceCost(m, algo, s, n)
	case topo.Broadcast:
		return broadcastCost(m, algo, s, n)
	case topo.Reduce:
		return reduceCost(m, algo, s, n)
	case topo.Gather:
		return gatherCost(m, algo, s, n)
	case topo.Scatter:
		return scatterCost(m, algo, s, n)
	case topo.AllGather:
		return allGatherCost(m, algo, s, n)
	case topo.ReduceScatter:
		return reduceScatterCost(m, algo, s, n)
	case topo.AllToAll:
		return allToAllCost(m, algo, s, n)
	case topo.Barrier:
		return barrierCost(m, algo, s)
	}
	return never
}

// predicted returns the time the model cached on c predicts for one call
// of coll by algo moving bytes (counted as Choose counts them), or 0 when
// c has no model yet (an algorithm forced by GORUN_ALGO or WithAlgo needs
// none) or algo does not apply. It never probes.
func predicted(c *spmd.Comm, coll topo.Collective, algo topo.Algo, bytes int) time.Duration {
	m, ok := topo.Cached(c)
	if !ok || algo == "" {
		return 0
	}
	s := Cost(m, coll, algo, c.Size(), bytes, topo.LayoutOf(c))
	if math.IsInf(s, 0) || math.IsNaN(s) || s <= 0 {
		return 0
	}
	return time.Duration(s * 1e9)
}
