package main

import (
	"context"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// caller returns one call of op over b's buffers by algo. Rank 0 is the
// root of the rooted collectives.
func caller[T elem](op, redop string, algo topo.Algo, c *spmd.Comm, b *bufs[T]) func(context.Context) error {
	const root = 0
	with := prims.WithAlgo(algo)
	rop := reduction[T](redop)
	switch op {
	case "allreduce":
		return func(ctx context.Context) error { return prims.AllReduce(ctx, c, b.send, rop, with) }
	case "broadcast":
		return func(ctx context.Context) error { return prims.Broadcast(ctx, c, b.send, root, with) }
	case "reduce":
		return func(ctx context.Context) error { return prims.Reduce(ctx, c, b.send, b.recv, rop, root, with) }
	case "allgather":
		return func(ctx context.Context) error { return prims.AllGather(ctx, c, b.send, b.recv, with) }
	case "reducescatter":
		return func(ctx context.Context) error { return prims.ReduceScatter(ctx, c, b.send, b.recv, rop, with) }
	case "alltoall":
		return func(ctx context.Context) error { return prims.AllToAll(ctx, c, b.send, b.recv, with) }
	case "gather":
		return func(ctx context.Context) error { return prims.Gather(ctx, c, b.send, b.recv, root, with) }
	case "scatter":
		return func(ctx context.Context) error { return prims.Scatter(ctx, c, b.send, b.recv, root, with) }
	}
	panic("collbench: unknown op " + op) // parseFlags admits only opNames
}

func reduction[T elem](redop string) prims.Op[T] {
	switch redop {
	case "prod":
		return prims.Prod[T]()
	case "max":
		return prims.Max[T]()
	case "min":
		return prims.Min[T]()
	}
	return prims.Sum[T]()
}
