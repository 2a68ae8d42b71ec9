package hybrid

import (
	"context"
	"errors"
	"fmt"

	"github.com/gorun-hpc/gorun/spmd"
)

// Mesh is the device mesh TP x DP x PP over a communicator's ranks, in
// Megatron's order: tensor parallelism innermost, so that the ranks of a
// tensor-parallel group are consecutive, which the launcher places on one
// host (their frequent all-reduces stay on shared memory); then data
// parallelism; pipeline stages outermost:
//
//	rank = t + TP·(d + DP·p)
//
// Each rank belongs to one group of each kind, made with Comm.Split.
type Mesh struct {
	TP, DP, PP int
	T, D, P    int // this rank's place: its rank in each group

	World  *spmd.Comm // the communicator the mesh was made from
	TPComm *spmd.Comm // the ranks of equal (d, p)
	DPComm *spmd.Comm // the ranks of equal (t, p)
	PPComm *spmd.Comm // the ranks of equal (t, d): rank p is stage p
}

// NewMesh splits c into the mesh's groups. Every rank of c calls it with
// the same sizes, whose product must be c's size.
func NewMesh(ctx context.Context, c *spmd.Comm, tp, dp, pp int) (*Mesh, error) {
	if tp < 1 || dp < 1 || pp < 1 {
		return nil, fmt.Errorf("hybrid: mesh tp %d x dp %d x pp %d: every size must be at least 1", tp, dp, pp)
	}
	if tp*dp*pp != c.Size() {
		return nil, fmt.Errorf("hybrid: mesh tp %d x dp %d x pp %d = %d ranks, but the job has %d: pick sizes whose product is the number of ranks", tp, dp, pp, tp*dp*pp, c.Size())
	}
	r := c.Rank()
	m := &Mesh{TP: tp, DP: dp, PP: pp, T: r % tp, D: (r / tp) % dp, P: r / (tp * dp), World: c}
	var err error
	if m.TPComm, err = c.Split(ctx, m.D+dp*m.P, m.T); err != nil {
		return nil, fmt.Errorf("hybrid: tensor-parallel group: %w", err)
	}
	if m.DPComm, err = c.Split(ctx, m.T+tp*m.P, m.D); err != nil {
		m.Close()
		return nil, fmt.Errorf("hybrid: data-parallel group: %w", err)
	}
	if m.PPComm, err = c.Split(ctx, m.T+tp*m.D, m.P); err != nil {
		m.Close()
		return nil, fmt.Errorf("hybrid: pipeline group: %w", err)
	}
	return m, nil
}

// Rank returns the world rank of the place (t, d, p).
func (m *Mesh) Rank(t, d, p int) int { return t + m.TP*(d+m.DP*p) }

// Close frees the groups.
func (m *Mesh) Close() error {
	var errs []error
	for _, c := range []*spmd.Comm{m.TPComm, m.DPComm, m.PPComm} {
		if c != nil {
			errs = append(errs, c.Free())
		}
	}
	m.TPComm, m.DPComm, m.PPComm = nil, nil, nil
	return errors.Join(errs...)
}
