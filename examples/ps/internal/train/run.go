package train

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gorun-hpc/gorun/examples/internal/workload"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/ps"
)

// Run trains as one rank of the job: a server or a worker, by cfg.Role,
// or by rank for ByRank. Rank 0, a server, prints one line per step,
// "step N loss L samples/s S", the loss being the mean over the workers,
// and "final loss L". ByRank alone trains in one process.
func Run(ctx context.Context, cfg Config, out io.Writer) (err error) {
	w, err := spmd.Init(ctx)
	if err != nil {
		return err
	}
	defer workload.Close(w, &err)
	if cfg.Role == ByRank && w.Size() == 1 {
		return alone(ctx, cfg, out)
	}
	servers, err := Layout(ctx, w.Comm, cfg)
	if err != nil {
		return err
	}
	workers := w.Size() - servers
	if err := cfg.checkWorkers(workers); err != nil {
		return err
	}
	worker := max(w.Rank()-servers, 0) // servers build worker 0's data: they read none
	wl, err := workload.New(cfg.Config, worker, workers)
	if err != nil {
		return err
	}
	if n := cfg.BatchNote(workers, "worker"); n != "" && w.Rank() == 0 {
		fmt.Fprintln(out, n)
	}
	d, err := ps.New(ctx, w.Comm, wl.Model, ps.Config{Servers: servers, Staleness: cfg.Staleness, Steps: cfg.Steps}, wl.Optimizer)
	if err != nil {
		return err
	}
	defer d.Close()
	if d.IsServer() {
		return serve(ctx, wl.Batch(), d, w.Rank() == 0, out)
	}
	for step := 0; step < cfg.Steps; step++ {
		batches, err := wl.Batches(step)
		if err != nil {
			return err
		}
		if d.Worker() == cfg.Slow {
			time.Sleep(cfg.Delay)
		}
		if _, err := d.Step(ctx, batches); err != nil {
			return err
		}
	}
	return nil
}

// serve runs a server; rank 0 prints each step as it is applied.
func serve(ctx context.Context, batch int, d *ps.PS, report bool, out io.Writer) error {
	var loss float32
	last := time.Now()
	err := d.Serve(ctx, func(step int, l float32) {
		loss = l
		if report {
			now := time.Now()
			fmt.Fprintf(out, "step %d loss %.6f samples/s %.1f\n", step+1, l, float64(batch)/now.Sub(last).Seconds())
			last = now
		}
	})
	if err != nil {
		return err
	}
	if report {
		fmt.Fprintf(out, "final loss %.6f\n", loss)
	}
	return nil
}

// alone trains in one process: there is no server to hold parameters.
func alone(ctx context.Context, cfg Config, out io.Writer) error {
	fmt.Fprintln(out, "one rank: no servers, training locally (run under gorun -np N for a parameter server)")
	wl, err := workload.New(cfg.Config, 0, 1)
	if err != nil {
		return err
	}
	if n := cfg.BatchNote(1, "rank"); n != "" {
		fmt.Fprintln(out, n)
	}
	st := wl.Model.Store()
	opt, err := wl.Optimizer(st.Params, 0, len(st.W))
	if err != nil {
		return err
	}
	var loss float32
	for step := 0; step < cfg.Steps; step++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		batches, err := wl.Batches(step)
		if err != nil {
			return err
		}
		t0 := time.Now()
		if loss, err = localStep(wl.Model, batches, opt); err != nil {
			return err
		}
		fmt.Fprintf(out, "step %d loss %.6f samples/s %.1f\n", step+1, loss, float64(wl.Batch())/time.Since(t0).Seconds())
	}
	fmt.Fprintf(out, "final loss %.6f\n", loss)
	return nil
}

func localStep(m nn.Model, micro []*nn.Batch, opt nn.Optimizer) (float32, error) {
	loss, err := nn.Accumulate(m, micro, func(_ int, scale float32) { m.Backward(scale) })
	if err == nil {
		st := m.Store()
		opt.Step(st.W, st.G)
	}
	return loss, err
}
