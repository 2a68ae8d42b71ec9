package prims_test

import (
	"context"
	"fmt"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/topo"
)

// check runs one call of coll with n elements (the vector length; the
// block length of the equal-block collectives, see blockLen) on this rank
// and compares what it got with the naive reference.
type check struct {
	coll    topo.Collective
	algo    topo.Algo
	n       int
	inPlace bool
}

func (k check) String() string {
	place := "out-of-place"
	if k.inPlace {
		place = "in-place"
	}
	return fmt.Sprintf("%s/%s n=%d %s", k.coll, k.algo, k.n, place)
}

// blockLen is the per-rank block of the equal-block collectives for a
// vector of n: n itself while small, else about n/p so that the total
// stays near n.
func blockLen(n, p int) int {
	if n <= 1000 {
		return n
	}
	return (n + p - 1) / p
}

func run[T spmd.Number](ctx context.Context, c *spmd.Comm, k check) error {
	var err error
	switch k.coll {
	case topo.Broadcast:
		err = checkBroadcast[T](ctx, c, k)
	case topo.Reduce:
		err = checkReduce(ctx, c, k, prims.Sum[T]())
	case topo.AllReduce:
		err = checkAllReduce(ctx, c, k, prims.Sum[T]())
	case topo.Gather:
		err = checkGather[T](ctx, c, k)
	case topo.Scatter:
		err = checkScatter[T](ctx, c, k)
	case topo.AllGather:
		err = checkAllGather[T](ctx, c, k)
	case topo.ReduceScatter:
		err = checkReduceScatter(ctx, c, k, prims.Sum[T]())
	case topo.AllToAll:
		err = checkAllToAll[T](ctx, c, k)
	case topo.Barrier:
		err = prims.Barrier(ctx, c, prims.WithAlgo(k.algo))
	}
	if err != nil {
		return fmt.Errorf("%T %v: %w", *new(T), k, err)
	}
	return nil
}

func checkBroadcast[T spmd.Number](ctx context.Context, c *spmd.Comm, k check) error {
	root := k.n % c.Size()
	want := func(i int) T { return tagValue[T](root, i) }
	buf := fill(k.n, func(int) T { return 7 })
	if c.Rank() == root {
		buf = fill(k.n, want)
	}
	if err := prims.Broadcast(ctx, c, buf, root, prims.WithAlgo(k.algo)); err != nil {
		return err
	}
	return expect("buf", buf, k.n, want)
}

func checkReduce[T spmd.Number](ctx context.Context, c *spmd.Comm, k check, op prims.Op[T]) error {
	root := (k.n + 1) % c.Size()
	mine := func(i int) T { return reduceValue[T](c.Rank(), i) }
	send := fill(k.n, mine)
	var recv []T
	if c.Rank() == root {
		recv = make([]T, k.n)
		if k.inPlace {
			recv = send
		}
	}
	if err := prims.Reduce(ctx, c, send, recv, op, root, prims.WithAlgo(k.algo)); err != nil {
		return err
	}
	if c.Rank() != root {
		return expect("send", send, k.n, mine)
	}
	return expect("recv", recv, k.n, reference(c.Size(), op))
}

func checkAllReduce[T spmd.Number](ctx context.Context, c *spmd.Comm, k check, op prims.Op[T]) error {
	mine := func(i int) T { return reduceValue[T](c.Rank(), i) }
	send := fill(k.n, mine)
	want := reference(c.Size(), op)
	if k.inPlace {
		if err := prims.AllReduce(ctx, c, send, op, prims.WithAlgo(k.algo)); err != nil {
			return err
		}
		return expect("buf", send, k.n, want)
	}
	recv := make([]T, k.n)
	if err := prims.AllReduceTo(ctx, c, send, recv, op, prims.WithAlgo(k.algo)); err != nil {
		return err
	}
	if err := expect("send", send, k.n, mine); err != nil {
		return err
	}
	return expect("recv", recv, k.n, want)
}

func checkReduceScatter[T spmd.Number](ctx context.Context, c *spmd.Comm, k check, op prims.Op[T]) error {
	send := fill(k.n, func(i int) T { return reduceValue[T](c.Rank(), i) })
	lo, hi := prims.Block(k.n, c.Size(), c.Rank())
	recv := make([]T, hi-lo)
	if k.inPlace {
		recv = send[lo:hi]
	}
	if err := prims.ReduceScatter(ctx, c, send, recv, op, prims.WithAlgo(k.algo)); err != nil {
		return err
	}
	want := reference(c.Size(), op)
	return expect("recv", recv, hi-lo, func(i int) T { return want(lo + i) })
}

// gathered is element i of the vector every rank's block of kk tagValues
// makes.
func gathered[T spmd.Number](kk int) func(i int) T {
	return func(i int) T { return tagValue[T](i/max(kk, 1), i%max(kk, 1)) }
}

func checkGather[T spmd.Number](ctx context.Context, c *spmd.Comm, k check) error {
	p, r, kk := c.Size(), c.Rank(), blockLen(k.n, c.Size())
	root := (k.n + 2) % p
	send := fill(kk, func(i int) T { return tagValue[T](r, i) })
	var recv []T
	if r == root {
		recv = make([]T, p*kk)
		if k.inPlace {
			copy(recv[r*kk:], send)
			send = recv[r*kk : (r+1)*kk]
		}
	}
	if err := prims.Gather(ctx, c, send, recv, root, prims.WithAlgo(k.algo)); err != nil {
		return err
	}
	if r != root {
		return nil
	}
	return expect("recv", recv, p*kk, gathered[T](kk))
}

func checkScatter[T spmd.Number](ctx context.Context, c *spmd.Comm, k check) error {
	p, r, kk := c.Size(), c.Rank(), blockLen(k.n, c.Size())
	root := (k.n + 3) % p
	var send []T
	recv := make([]T, kk)
	if r == root {
		send = fill(p*kk, gathered[T](kk))
		if k.inPlace {
			recv = send[r*kk : (r+1)*kk]
		}
	}
	if err := prims.Scatter(ctx, c, send, recv, root, prims.WithAlgo(k.algo)); err != nil {
		return err
	}
	return expect("recv", recv, kk, func(i int) T { return tagValue[T](r, i) })
}

func checkAllGather[T spmd.Number](ctx context.Context, c *spmd.Comm, k check) error {
	p, r, kk := c.Size(), c.Rank(), blockLen(k.n, c.Size())
	send := fill(kk, func(i int) T { return tagValue[T](r, i) })
	recv := make([]T, p*kk)
	if k.inPlace {
		copy(recv[r*kk:], send)
		send = recv[r*kk : (r+1)*kk]
	}
	if err := prims.AllGather(ctx, c, send, recv, prims.WithAlgo(k.algo)); err != nil {
		return err
	}
	return expect("recv", recv, p*kk, gathered[T](kk))
}

func checkAllToAll[T spmd.Number](ctx context.Context, c *spmd.Comm, k check) error {
	p, r, kk := c.Size(), c.Rank(), blockLen(k.n, c.Size())
	// Element i of block j from rank r says (r, j, i).
	val := func(from, to, i int) T { return T((from*37 + to*11 + i) % 103) }
	send := fill(p*kk, func(i int) T { return val(r, i/max(kk, 1), i%max(kk, 1)) })
	recv := make([]T, p*kk)
	if err := prims.AllToAll(ctx, c, send, recv, prims.WithAlgo(k.algo)); err != nil {
		return err
	}
	return expect("recv", recv, p*kk, func(i int) T { return val(i/max(kk, 1), r, i%max(kk, 1)) })
}
