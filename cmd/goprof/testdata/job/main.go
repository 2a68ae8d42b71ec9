// Command job is the program goprof's process test profiles: under gorun
// on 4 ranks it runs training-like steps (regions, a non-blocking
// all-reduce overlapped with "backward", a blocking one), and rank 1 sends
// rank 2 a message 50 ms after rank 2 began to wait for it: a late
// sender goprof must find.
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/spmd/trace"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run() error {
	ctx := context.Background()
	w, err := spmd.Init(ctx)
	if err != nil {
		return err
	}
	defer w.Close()
	if w.Size() < 3 {
		return fmt.Errorf("run me on 3 ranks or more")
	}
	grad := make([]float32, 64<<10)
	loss := make([]float64, 1)
	for step := 0; step < 5; step++ {
		s := trace.Region(ctx, "step")
		f := trace.Region(ctx, "forward")
		spin(2 * time.Millisecond)
		f.End()
		b := trace.Region(ctx, "backward")
		req := prims.IAllReduce(ctx, w.Comm, grad, prims.Sum[float32]())
		spin(3 * time.Millisecond)
		b.End()
		wait := trace.Region(ctx, "wait")
		err := req.Wait(ctx)
		wait.End()
		if err != nil {
			return err
		}
		o := trace.Region(ctx, "optimizer")
		spin(time.Millisecond)
		o.End()
		s.End()
		if err := prims.AllReduce(ctx, w.Comm, loss, prims.Sum[float64]()); err != nil {
			return err
		}
	}
	if err := w.Barrier(ctx); err != nil {
		return err
	}
	msg := make([]byte, 4096)
	switch w.Rank() {
	case 1:
		time.Sleep(50 * time.Millisecond)
		if err := w.Send(ctx, 2, 9, msg); err != nil {
			return err
		}
	case 2:
		if _, err := w.Recv(ctx, 1, 9, msg); err != nil {
			return err
		}
	}
	return w.Barrier(ctx)
}

// spin computes for d, as a model's layers would.
func spin(d time.Duration) {
	x := 1.0
	for t := time.Now(); time.Since(t) < d; {
		for i := 0; i < 1000; i++ {
			x = x*1.0000001 + 1e-9
		}
	}
	if x < 0 {
		fmt.Println(x)
	}
}
