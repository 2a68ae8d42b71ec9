package prims_test

import (
	"context"
	"fmt"
	"sync"

	"github.com/gorun-hpc/gorun/net/mem"
	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// ExampleAllReduce sums a vector across four ranks. Under gorun each rank
// is a process that gets its world from spmd.Init; here the four ranks are
// goroutines joined by the in-process transport.
func ExampleAllReduce() {
	const ranks = 4
	nw := mem.NewNetwork(ranks)
	peers := make([]spmd.Peer, ranks)
	for i := range peers {
		peers[i] = spmd.Peer{Rank: i, HostID: "example"}
	}
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := spmd.New(nw.Transport(r), r, peers) // spmd.Init(ctx) in a real program
			if err != nil {
				panic(err)
			}
			defer w.Close()
			ctx := context.Background()

			grad := []float32{float32(r), 1, 10}
			if err := prims.AllReduce(ctx, w.Comm, grad, prims.Sum[float32]()); err != nil {
				panic(err)
			}
			if w.Rank() == 0 {
				fmt.Println(grad)
			}
			// Every rank holds the same sum; wait for all before closing.
			if err := prims.Barrier(ctx, w.Comm); err != nil {
				panic(err)
			}
		}()
	}
	wg.Wait()
	// Output: [6 4 40]
}

// ExampleIAllReduce overlaps the all-reduces of two gradient buckets with
// the computation of a third, as a data-parallel driver does during
// backward, then waits for them.
func ExampleIAllReduce() {
	const ranks = 2
	nw := mem.NewNetwork(ranks)
	peers := make([]spmd.Peer, ranks)
	for i := range peers {
		peers[i] = spmd.Peer{Rank: i, HostID: "example"}
	}
	var wg sync.WaitGroup
	for r := range ranks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := spmd.New(nw.Transport(r), r, peers)
			if err != nil {
				panic(err)
			}
			defer w.Close()
			ctx := context.Background()

			sum := prims.Sum[float32]()
			last := []float32{float32(r), 1}
			// The buffers belong to the all-reduces until they complete.
			reqs := []*prims.Request{prims.IAllReduce(ctx, w.Comm, last, sum)}
			first := []float32{10, float32(r)}
			reqs = append(reqs, prims.IAllReduce(ctx, w.Comm, first, sum))
			third := []float32{float32(r) * 2} // computed meanwhile
			for _, req := range reqs {
				if err := req.Wait(ctx); err != nil {
					panic(err)
				}
			}
			// A blocking call runs after the non-blocking ones before it.
			if err := prims.AllReduce(ctx, w.Comm, third, sum); err != nil {
				panic(err)
			}
			if w.Rank() == 0 {
				fmt.Println(last, first, third)
			}
			if err := prims.Barrier(ctx, w.Comm); err != nil {
				panic(err)
			}
		}()
	}
	wg.Wait()
	// Output: [1 2] [20 1] [2]
}

// Cheapest answers for machines it is not running on, given a model with
// fixed constants: here 2 hosts of 4 ranks, linked by a network four times
// slower than a host's loopback.
func ExampleCheapest() {
	m := topo.Model{
		Local:  topo.Link{Alpha: 10e-6, Beta: 1 / 2.5e9},
		Remote: topo.Link{Alpha: 40e-6, Beta: 1 / 0.6e9},
		Gamma:  1 / 5e9,
		Cores:  8,
	}
	lay := topo.Uniform(2, 4)
	for _, n := range []int{8, 64 << 10, 64 << 20} {
		fmt.Printf("allreduce of %s: %s\n", topo.Size(n), prims.Cheapest(m, topo.AllReduce, 8, n, lay))
	}
	// Output:
	// allreduce of 8 B: recdbl
	// allreduce of 64 KiB: rabenseifner
	// allreduce of 64 MiB: hier
}
