package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/examples/internal/workload"
	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/hybrid"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/nn/data"
	"github.com/gorun-hpc/gorun/strategies/pipe"
)

func run(ctx context.Context, c config, out io.Writer) (err error) {
	if c.printSchedule {
		s, err := pipe.New(c.schedule, c.pp, c.micro, c.virtual)
		if err != nil {
			return err
		}
		return s.Draw(out)
	}
	w, err := spmd.Init(ctx)
	if err != nil {
		return err
	}
	defer workload.Close(w, &err)
	if err := workload.AgreeFlags(ctx, w.Comm, "gpt", c.flags); err != nil {
		return err
	}
	corp, err := workload.ReadCorpus(c.data, c.maxBytes)
	if err != nil {
		return err
	}
	if err := corp.CheckVocab(c.vocab); err != nil {
		return err
	}
	vocab := corp.Vocab
	if c.vocab > 0 {
		vocab = c.vocab
	}
	model := nn.GPTConfig{Vocab: vocab, Context: c.block, Layers: c.layers, Heads: c.heads, Dim: c.embd, Dropout: float32(c.dropout)}
	if c.plan {
		return planJob(ctx, w, c, model, out)
	}
	return train(ctx, w, c, model, corp.Tokens, out)
}

func train(ctx context.Context, w *spmd.World, c config, model nn.GPTConfig, tokens []uint16, out io.Writer) error {
	if err := c.checkMesh(w.Size()); err != nil {
		return err
	}
	check := !workload.NothingToResume(c.ckpt, c.resume, w.Env().MaxRestarts)
	if err := workload.CheckCheckpointDir(ctx, w.Comm, c.ckpt, check); err != nil {
		return err
	}
	st := &stats{}
	codec, _ := compress.Parse(c.compress, c.seed) // checked with the flags
	cfg := hybrid.Config{Compress: codec, Model: model, TP: c.tp, PP: c.pp, DP: c.dp, Zero: c.zero, Micro: c.micro,
		Schedule: c.schedule, Virtual: c.virtual, SeqParallel: c.seqParallel, Seed: c.seed,
		Optimizer: func(params []*nn.Param, lo, hi int) (nn.Optimizer, error) {
			a := nn.DefaultAdamW()
			a.LR = float32(c.lr)
			return nn.NewAdamW(a, params, lo, hi)
		},
		Observe: st.observe,
	}
	// The engine's own checks first (they fill DP), then the batch's cut
	// over its replicas and the memory it needs, before the engine
	// allocates anything.
	if err := cfg.Validate(w.Size()); err != nil {
		return err
	}
	batch, note, err := c.globalBatch(cfg.DP)
	if err != nil {
		return err
	}
	c.batch = batch // what the step lines and the checkpoint count
	if note != "" && w.Rank() == 0 {
		fmt.Fprintln(out, note)
	}
	if err := checkMemory(ctx, w, c, cfg); err != nil {
		return err
	}
	seqs, err := data.Sequences(tokens, c.block)
	if err != nil {
		return err
	}
	e, err := hybrid.New(ctx, w.Comm, cfg)
	if err != nil {
		return err
	}
	defer e.Close()
	m := e.Mesh()
	s, err := data.NewSampler(seqs.Len(), c.batch, m.D, m.DP, c.seed, true)
	if err != nil {
		return fmt.Errorf("--batch %d over %d replicas: %w", c.batch, m.DP, err)
	}
	// Replica D holds the step's sequences from D·LocalBatch (Sampler.Local):
	// First tells the engine, whose dropout masks the whole batch's rows.
	b := &nn.Batch{N: s.LocalBatch(), T: c.block, Tokens: make([]int32, s.LocalBatch()*c.block), Y: make([]int32, s.LocalBatch()*c.block), First: m.D * s.LocalBatch()}
	first := 0
	if c.resume {
		if first, err = resume(ctx, w, e, c, model, out); err != nil {
			return err
		}
	}
	if first >= c.steps {
		if w.Rank() == 0 {
			fmt.Fprintln(out, workload.NothingToTrain(c.ckpt, first, c.steps))
		}
		return nil
	}
	meta := checkpointMeta(c, model, m)
	var loss float32
	for step := first; step < c.steps; step++ {
		if err := seqs.Batch(s.Local(step), b.Tokens, b.Y); err != nil {
			return err
		}
		st.begin()
		t0 := time.Now()
		if loss, err = e.Step(ctx, b); err != nil {
			return fmt.Errorf("step %d: %w", step+1, err)
		}
		dt := time.Since(t0)
		st.end(step - first)
		if w.Rank() == 0 {
			fmt.Fprintf(out, "step %d loss %.4f tokens/s %.0f\n", step+1, loss, float64(c.batch*c.block)/dt.Seconds())
		}
		if c.ckpt != "" && (step+1 == c.steps || c.ckptEvery > 0 && (step+1)%c.ckptEvery == 0) {
			if err := e.Save(ctx, c.ckpt, step+1, meta); err != nil {
				return fmt.Errorf("--ckpt: %w", err)
			}
		}
	}
	if w.Rank() == 0 {
		fmt.Fprintf(out, "final loss %.4f\n", loss)
		if codec != nil {
			idle := ""
			if !e.CodecActive() {
				idle = workload.OneReplica
			}
			fmt.Fprintln(out, workload.CompressionReport(codec, e.Compression(), c.steps-first, idle))
		}
	}
	if c.stats {
		return st.report(ctx, e, out)
	}
	return nil
}

// stats measures the pipeline from the operations the executor reports:
// per step, the time this rank computed and the time from the step's
// start to its last operation's end.
type stats struct {
	busy  time.Duration
	last  time.Duration
	busys []float64 // per step after the first
	spans []float64
	step  int
	ops   map[pipe.Op]time.Duration // per kind and chunk (MB 0), after the first step
	count map[pipe.Op]int
}

func (s *stats) begin() { s.busy, s.last = 0, 0 }

func (s *stats) observe(ev pipe.Event) {
	s.busy += ev.End - ev.Start
	s.last = max(s.last, ev.End)
	if s.step > 0 {
		if s.ops == nil {
			s.ops, s.count = map[pipe.Op]time.Duration{}, map[pipe.Op]int{}
		}
		k := pipe.Op{Kind: ev.Op.Kind, Chunk: ev.Op.Chunk}
		s.ops[k] += ev.End - ev.Start
		s.count[k]++
	}
}

func (s *stats) end(step int) {
	if step > 0 { // the first step builds the slots and warms the caches
		s.busys = append(s.busys, s.busy.Seconds())
		s.spans = append(s.spans, s.last.Seconds())
	}
	s.step = step + 1
}

// simulated is the bubble the schedule has when each chunk's forward and
// backward take their measured mean times (pipe.Simulate): the formula's
// answer for stages that do not cost the same. Every rank of the
// pipeline group calls it.
func (s *stats) simulated(ctx context.Context, e *hybrid.Engine) (float64, error) {
	sc := e.Schedule()
	n := sc.Chunks()
	mean := make([]float64, 2*n) // forwards, then backwards
	for k, d := range s.ops {
		i := k.Chunk
		if k.Kind == pipe.Backward {
			i += n
		}
		mean[i] = d.Seconds() / float64(s.count[k])
	}
	if err := prims.AllReduce(ctx, e.Mesh().PPComm, mean, prims.Sum[float64]()); err != nil {
		return 0, err
	}
	tl, err := sc.Simulate(pipe.Costs{
		Forward:  func(c int) float64 { return mean[c] },
		Backward: func(c int) float64 { return mean[n+c] },
	})
	if err != nil {
		return 0, err
	}
	return tl.Bubble(), nil
}

// report prints, from the first rank of each stage, the stage's
// micro-batches in flight, activation bytes and bubble: the share of
// the steps' pipeline time (the slowest stage's span) it was idle. A
// stage's span is on its own clock, from its pipe.Run's start to its
// last operation's end: goprof's span, from the first stage's start to
// the last stage's end on the aligned clocks, also counts how far apart
// the stages start and the sends waited for at the end.
func (s *stats) report(ctx context.Context, e *hybrid.Engine, out io.Writer) error {
	m := e.Mesh()
	spans := append([]float64(nil), s.spans...)
	if len(spans) > 0 {
		if err := prims.AllReduce(ctx, m.PPComm, spans, prims.Max[float64]()); err != nil {
			return err
		}
	}
	sim, err := s.simulated(ctx, e)
	if err != nil {
		return err
	}
	if m.T != 0 || m.D != 0 {
		return nil
	}
	var busy, span float64
	for i := range spans {
		busy += s.busys[i]
		span += spans[i]
	}
	var act hybrid.Activations
	for _, p := range e.Parts() {
		a := p.Activations()
		act.InFlight += a.InFlight
		act.Peak += a.Peak
	}
	sc := e.Schedule()
	bubble, what := "n/a (one step)", ""
	if span > 0 {
		bubble = fmt.Sprintf("%.1f%%", 100*(1-busy/span))
		what = fmt.Sprintf(": idle share of the slowest stage's time from its schedule's start to its last operation, steps 2-%d", len(spans)+1)
	}
	fmt.Fprintf(out, "stage %d in-flight %d activations %d bubble %s (formula %.1f%%, simulated %.1f%%)%s\n",
		m.P, act.InFlight, act.Peak, bubble, 100*pipe.IdealBubble(sc.Name, sc.Stages, sc.Micro, sc.Virtual), 100*sim, what)
	return nil
}
