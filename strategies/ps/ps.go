package ps

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/internal/replica"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// Message tags on the driver's communicator.
const (
	pushTag  = 1
	replyTag = 2
)

// header is the size of a message's leading loss or version.
const header = 8

// Config says how many ranks serve and how stale a worker's parameters
// may be.
type Config struct {
	Servers   int // the first Servers ranks; at least 1, fewer than the ranks
	Staleness int // 0 = synchronous
	// Steps is how many steps the job runs: servers serve that many.
	Steps int
}

// NewOptimizer makes a server's optimizer over its shard [lo, hi).
type NewOptimizer func(params []*nn.Param, lo, hi int) (nn.Optimizer, error)

// PS is one rank's part of a parameter-server job: a server or a worker.
type PS struct {
	comm   *spmd.Comm
	cfg    Config
	model  nn.Model
	shards [][2]int // server -> [lo, hi) of the flat buffer

	srv *server // set on servers
	wrk *worker // set on workers
}

// New sets up the rank's role on comm. Every rank of comm calls it with a
// model of the same layout. Servers start from their shard of their own
// model's parameters (a model built from the same seed on every rank is
// the same), and send it to every worker, which New on a worker receives.
func New(ctx context.Context, comm *spmd.Comm, model nn.Model, cfg Config, opt NewOptimizer) (*PS, error) {
	p := comm.Size()
	if cfg.Servers < 1 || cfg.Servers >= p {
		return nil, fmt.Errorf("ps: %d servers among %d ranks: want at least 1 server and 1 worker (--servers between 1 and %d)", cfg.Servers, p, p-1)
	}
	if cfg.Staleness < 0 {
		return nil, fmt.Errorf("ps: staleness %d: want 0 (synchronous) or more", cfg.Staleness)
	}
	if cfg.Steps < 0 {
		return nil, fmt.Errorf("ps: %d steps: want 0 or more", cfg.Steps)
	}
	c, err := comm.Dup(ctx)
	if err != nil {
		return nil, fmt.Errorf("ps: %w", err)
	}
	st := model.Store()
	if err := replica.Same(ctx, c, st, "ps"); err != nil {
		c.Free()
		return nil, err
	}
	d := &PS{comm: c, cfg: cfg, model: model}
	for k := 0; k < cfg.Servers; k++ {
		lo, hi := prims.Block(len(st.W), cfg.Servers, k)
		d.shards = append(d.shards, [2]int{lo, hi})
	}
	if d.IsServer() {
		err = d.startServer(ctx, opt)
	} else {
		err = d.startWorker(ctx)
	}
	if err != nil {
		c.Free()
		return nil, err
	}
	return d, nil
}

// IsServer says whether this rank serves.
func (d *PS) IsServer() bool { return d.comm.Rank() < d.cfg.Servers }

// Workers is the number of workers.
func (d *PS) Workers() int { return d.comm.Size() - d.cfg.Servers }

// Worker is this rank's index among the workers, or -1 on a server.
func (d *PS) Worker() int {
	if d.IsServer() {
		return -1
	}
	return d.comm.Rank() - d.cfg.Servers
}

// Comm is the driver's own communicator.
func (d *PS) Comm() *spmd.Comm { return d.comm }

// Close lets go of the driver's communicator. Every rank calls it.
func (d *PS) Close() error { return d.comm.Free() }

// putF64 and getF64 read and write a message's 8-byte header.
func putF64(b []byte, v float64) { binary.LittleEndian.PutUint64(b, math.Float64bits(v)) }
func getF64(b []byte) float64    { return math.Float64frombits(binary.LittleEndian.Uint64(b)) }
