package plan

import (
	"errors"
	"math"

	"github.com/gorun-hpc/gorun/strategies/nn"
)

// Job is what is to be trained and on what.
type Job struct {
	Model        nn.GPTConfig // Layers, Heads, Dim, Vocab and Context are used
	Seq          int          // tokens per sequence, at most Model.Context
	GlobalBatch  int          // sequences per optimizer step, over all data-parallel ranks
	Ranks        int          // N, the ranks of the job
	RanksPerHost int          // ranks on one host; 0 means all on one host
	MemPerRank   int64        // bytes a rank may hold; 0 means no limit
}

// Validate reports every problem of the job, each wrapping ErrJob,
// joined; nil if there is none.
func (j Job) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, errorf(ErrJob, format, a...)) }
	if err := j.Model.Validate(); err != nil {
		errs = append(errs, &kindError{msg: "plan: job.Model: " + err.Error(), kind: ErrJob, cause: err})
	}
	if j.Ranks < 1 {
		bad("plan: job.Ranks %d: pass the number of ranks, 1 or more", j.Ranks)
	}
	if j.RanksPerHost < 0 {
		bad("plan: job.RanksPerHost %d: pass the ranks on one host, or 0 if all are on one", j.RanksPerHost)
	}
	if j.Seq < 1 {
		bad("plan: job.Seq %d: pass the tokens per sequence, 1 or more", j.Seq)
	} else if j.Model.Context > 0 && j.Seq > j.Model.Context {
		bad("plan: job.Seq %d is longer than job.Model.Context %d: pass a Seq of at most %d or a longer Context",
			j.Seq, j.Model.Context, j.Model.Context)
	}
	if j.GlobalBatch < 1 {
		bad("plan: job.GlobalBatch %d: pass the sequences per optimizer step, 1 or more", j.GlobalBatch)
	}
	if j.MemPerRank < 0 {
		bad("plan: job.MemPerRank %d: pass the bytes a rank may hold, or 0 for no limit", j.MemPerRank)
	}
	return errors.Join(errs...)
}

// perHost is the ranks on one host, RanksPerHost or, if that is 0, all.
func (j Job) perHost() int {
	if j.RanksPerHost == 0 {
		return j.Ranks
	}
	return j.RanksPerHost
}

// host is the host of rank r: ranks fill hosts in order.
func (j Job) host(r int) int { return r / j.perHost() }

// Coeffs are the floats of activations a transformer block keeps for its
// backward pass, per sequence of the micro-batch (see the package
// documentation): Rep·T·C for the tensors every TP rank holds whole
// (LayerNorm inputs and outputs, the residual stream, dropout masks),
// Split·T·C/TP for those TP cuts (q, k, v, the attention output, the
// MLP's 4C-wide hidden and its GELU), and Score·H·T²/TP for the attention
// scores and probabilities.
type Coeffs struct {
	Rep, Split, Score float64
}

// DefaultCoeffs are the coefficients before calibration against the
// engine's measured memory.
var DefaultCoeffs = Coeffs{Rep: 16, Split: 25, Score: 2}

// Machine is what the planner knows of the hardware, measured by the
// caller (topo's fitted constants and a GEMM probe). Times are seconds,
// sizes bytes.
type Machine struct {
	Flops               float64 // sustained fp32 GEMM FLOP/s of one rank
	AlphaNear, BetaNear float64 // latency (s) and inverse bandwidth (s/byte) between ranks of one host
	AlphaFar, BetaFar   float64 // the same between hosts
	MemBandwidth        float64 // bytes/s for element-wise work (the optimizer step) on one rank; 0 leaves the optimizer step out
	Coeffs              Coeffs  // activation coefficients; the zero value means DefaultCoeffs

	// Replicated is the seconds per token and block, forward and
	// backward, of the work every TP rank repeats whole (the LayerNorms,
	// the residual adds): it does not shrink with TP (it does with
	// sequence parallelism). 0 leaves it out.
	Replicated float64
	// Cores is the cores of a host; 0 means one per rank. With more
	// ranks on a host than cores, the host's cores bound its ranks'
	// compute, and a pipeline's idle stages give their cores to the
	// others; each message inside the host also waits Wake per rank
	// beyond the cores for its receiver to be scheduled (topo's Wake).
	Cores int
	Wake  float64
}

// Validate reports every problem of the machine, each wrapping
// ErrMachine, joined; nil if there is none.
func (m Machine) Validate() error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, errorf(ErrMachine, format, a...)) }
	if !(m.Flops > 0) || math.IsInf(m.Flops, 0) {
		bad("plan: machine.Flops %g: pass the measured GEMM rate of one rank in FLOP/s", m.Flops)
	}
	for _, f := range []struct {
		name string
		v    float64
	}{
		{"AlphaNear", m.AlphaNear}, {"BetaNear", m.BetaNear}, {"AlphaFar", m.AlphaFar}, {"BetaFar", m.BetaFar},
		{"MemBandwidth", m.MemBandwidth}, {"Replicated", m.Replicated}, {"Wake", m.Wake},
		{"Coeffs.Rep", m.Coeffs.Rep}, {"Coeffs.Split", m.Coeffs.Split}, {"Coeffs.Score", m.Coeffs.Score},
	} {
		if !(f.v >= 0) || math.IsInf(f.v, 0) {
			bad("plan: machine.%s %g: pass a finite number, 0 or more", f.name, f.v)
		}
	}
	if m.Cores < 0 {
		bad("plan: machine.Cores %d: pass the cores of a host, or 0 for one per rank", m.Cores)
	}
	return errors.Join(errs...)
}

// crowding is how many ranks of a host share each core: perHost/Cores,
// at least 1.
func (m Machine) crowding(perHost int) float64 {
	if m.Cores == 0 || perHost <= m.Cores {
		return 1
	}
	return float64(perHost) / float64(m.Cores)
}

// coeffs is Coeffs, or DefaultCoeffs if it is the zero value.
func (m Machine) coeffs() Coeffs {
	if m.Coeffs == (Coeffs{}) {
		return DefaultCoeffs
	}
	return m.Coeffs
}
