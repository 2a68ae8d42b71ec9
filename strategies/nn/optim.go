package nn

import (
	"fmt"
	"math"
)

// Optimizer updates the parameters of one range [lo, hi) of a model's
// flat buffers from their gradients. The range is the whole model for
// data parallelism and a rank's shard for ZeRO or a parameter server: w
// and g passed to Step are that range's elements, wherever they live.
type Optimizer interface {
	Step(w, g []float32)
	// State lists the optimizer's state as named buffers (views: loading
	// a checkpoint writes into them) and its step count.
	State() []State
	SetLR(lr float32)
	// Range is the part [lo, hi) of the flat buffers the optimizer owns.
	Range() (lo, hi int)
}

// State is one buffer of an optimizer's state. Exactly one of F32 and I64
// is set.
type State struct {
	Name string
	F32  []float32
	I64  []int64
}

// span is a part of an optimizer's range with one weight-decay rule.
type span struct {
	lo, hi int // relative to the range
	decay  bool
}

// spans cuts [lo, hi) into the parts of the parameters that overlap it.
func spans(params []*Param, lo, hi int) ([]span, error) {
	if lo < 0 || hi < lo {
		return nil, fmt.Errorf("optimizer range [%d, %d) is empty or negative", lo, hi)
	}
	var out []span
	covered := lo
	for _, p := range params {
		a, b := max(p.Offset, lo), min(p.End(), hi)
		if a >= b {
			continue
		}
		if a != covered {
			return nil, fmt.Errorf("optimizer range [%d, %d): no parameter holds [%d, %d)", lo, hi, covered, a)
		}
		out = append(out, span{a - lo, b - lo, p.Decay})
		covered = b
	}
	if covered != hi {
		return nil, fmt.Errorf("optimizer range [%d, %d) runs past the parameters, which end at %d", lo, hi, covered)
	}
	return out, nil
}

// SGDConfig is PyTorch's SGD: momentum, dampening-free, optionally
// Nesterov, with L2 weight decay added to the gradient.
type SGDConfig struct {
	LR, Momentum, WeightDecay float32
	Nesterov                  bool
}

// SGD is stochastic gradient descent with momentum over one range.
type SGD struct {
	cfg    SGDConfig
	lo, hi int
	spans  []span
	buf    []float32
	steps  []int64
}

// NewSGD returns SGD over [lo, hi) of the buffers that params live in.
func NewSGD(cfg SGDConfig, params []*Param, lo, hi int) (*SGD, error) {
	sp, err := spans(params, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("sgd: %w", err)
	}
	return &SGD{cfg: cfg, lo: lo, hi: hi, spans: sp, buf: make([]float32, hi-lo), steps: []int64{0}}, nil
}

// Range is the optimizer's part of the flat buffers.
func (o *SGD) Range() (lo, hi int) { return o.lo, o.hi }

// SetLR changes the learning rate.
func (o *SGD) SetLR(lr float32) { o.cfg.LR = lr }

// State is the momentum buffer and the step count.
func (o *SGD) State() []State {
	return []State{{Name: "momentum", F32: o.buf}, {Name: "step", I64: o.steps}}
}

// Step applies one update: g += wd·w; buf = μ·buf + g (buf = g at the
// first step); w -= lr·buf (or lr·(g + μ·buf) with Nesterov).
func (o *SGD) Step(w, g []float32) {
	lr, mu := o.cfg.LR, o.cfg.Momentum
	first := o.steps[0] == 0
	for _, s := range o.spans {
		wd := float32(0)
		if s.decay {
			wd = o.cfg.WeightDecay
		}
		ws, gs, bs := w[s.lo:s.hi], g[s.lo:s.hi], o.buf[s.lo:s.hi]
		for i := range ws {
			d := gs[i] + wd*ws[i]
			if mu != 0 {
				if first {
					bs[i] = d
				} else {
					bs[i] = mu*bs[i] + d
				}
				if o.cfg.Nesterov {
					d += mu * bs[i]
				} else {
					d = bs[i]
				}
			}
			ws[i] -= lr * d
		}
	}
	o.steps[0]++
}

// AdamWConfig is PyTorch's AdamW: decoupled weight decay.
type AdamWConfig struct {
	LR, Beta1, Beta2, Eps, WeightDecay float32
}

// DefaultAdamW is PyTorch's defaults (lr 1e-3, betas 0.9 and 0.999, eps
// 1e-8, weight decay 0.01).
func DefaultAdamW() AdamWConfig {
	return AdamWConfig{LR: 1e-3, Beta1: 0.9, Beta2: 0.999, Eps: 1e-8, WeightDecay: 0.01}
}

// AdamW is Adam with decoupled weight decay over one range.
type AdamW struct {
	cfg    AdamWConfig
	lo, hi int
	spans  []span
	m, v   []float32
	steps  []int64
}

// NewAdamW returns AdamW over [lo, hi) of the buffers that params live in.
func NewAdamW(cfg AdamWConfig, params []*Param, lo, hi int) (*AdamW, error) {
	sp, err := spans(params, lo, hi)
	if err != nil {
		return nil, fmt.Errorf("adamw: %w", err)
	}
	n := hi - lo
	return &AdamW{cfg: cfg, lo: lo, hi: hi, spans: sp, m: make([]float32, n), v: make([]float32, n), steps: []int64{0}}, nil
}

// Range is the optimizer's part of the flat buffers.
func (o *AdamW) Range() (lo, hi int) { return o.lo, o.hi }

// SetLR changes the learning rate.
func (o *AdamW) SetLR(lr float32) { o.cfg.LR = lr }

// State is the two moment buffers and the step count.
func (o *AdamW) State() []State {
	return []State{{Name: "exp_avg", F32: o.m}, {Name: "exp_avg_sq", F32: o.v}, {Name: "step", I64: o.steps}}
}

// Step applies one update: w -= lr·wd·w, then Adam's bias-corrected step.
func (o *AdamW) Step(w, g []float32) {
	o.steps[0]++
	c := o.cfg
	t := float64(o.steps[0])
	bc1 := 1 - math.Pow(float64(c.Beta1), t)
	bc2 := 1 - math.Pow(float64(c.Beta2), t)
	stepSize := float32(float64(c.LR) / bc1)
	sqrtBC2 := float32(math.Sqrt(bc2))
	for _, s := range o.spans {
		decay := float32(1)
		if s.decay {
			decay = 1 - c.LR*c.WeightDecay
		}
		ws, gs := w[s.lo:s.hi], g[s.lo:s.hi]
		ms, vs := o.m[s.lo:s.hi], o.v[s.lo:s.hi]
		for i, gi := range gs {
			ms[i] = c.Beta1*ms[i] + (1-c.Beta1)*gi
			vs[i] = c.Beta2*vs[i] + (1-c.Beta2)*gi*gi
			denom := float32(math.Sqrt(float64(vs[i])))/sqrtBC2 + c.Eps
			ws[i] = ws[i]*decay - stepSize*ms[i]/denom
		}
	}
}
