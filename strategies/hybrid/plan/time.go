package plan

// link is the α-β model of one kind of link: a message of n bytes takes
// α + n·β.
type link struct{ alpha, beta float64 }

// near and far are the links inside a host and between hosts. On a host
// with more ranks than cores, a message inside it also waits Wake per
// rank beyond the cores for its receiver to be scheduled.
func (j Job) near(m Machine) link {
	extra := 0.0
	if m.Cores > 0 && j.perHost() > m.Cores {
		extra = m.Wake * float64(j.perHost()-m.Cores)
	}
	return link{m.AlphaNear + extra, m.BetaNear}
}

func (m Machine) far() link { return link{m.AlphaFar, m.BetaFar} }

// pick is the far link if crosses, else the near one.
func (j Job) pick(m Machine, crosses bool) link {
	if crosses {
		return m.far()
	}
	return j.near(m)
}

// send is one point-to-point message of n bytes: α + n·β.
func (k link) send(n float64) float64 { return k.alpha + n*k.beta }

// allReduce is a ring all-reduce of n bytes over g ranks:
// 2(g-1)α + 2(g-1)/g·n·β; 0 for one rank.
func (k link) allReduce(g int, n float64) float64 { return 2 * k.half(g, n) }

// half is a ring reduce-scatter or all-gather of n bytes (the whole
// buffer) over g ranks: (g-1)α + (g-1)/g·n·β; 0 for one rank.
func (k link) half(g int, n float64) float64 {
	if g <= 1 {
		return 0
	}
	f := float64(g - 1)
	return f*k.alpha + f/float64(g)*n*k.beta
}

// stageTime is the time one micro-batch takes on stage s, in parts.
type stageTime struct {
	compute, tp, pp float64
}

func (t stageTime) total() float64 { return t.compute + t.tp + t.pp }

// stageTime models one micro-batch of b sequences of T tokens on TP rank
// 0 of stage s (the one with the largest vocabulary share), forward and
// backward:
//
//	compute: blocks·b·T·3·(24C² + 4T·C)/TP, plus on the last stage the
//	         head's b·T·3·2·C·V_t, FLOPs over Machine.Flops; plus
//	         blocks·b·T·Machine.Replicated (/TP with sequence parallelism)
//	tp:      per block 4 ring all-reduces of b·T·C·4 bytes (with sequence
//	         parallelism 4 all-gathers and 4 reduce-scatters, the same
//	         time); stage 0 one more for the embedding; the last stage one
//	         more for the head's input (its gradient backward) and 3 of
//	         b·T·4 bytes for the vocabulary-parallel cross-entropy
//	pp:      the messages the stage sends, α + n·β each for n = b·T·C·4
//	         bytes (/TP with sequence parallelism): an activation to the
//	         next stage, a gradient to the one before; interleaved, v of
//	         each (the wrap from the last rank to the first included) less
//	         the first chunk's gradient and the last chunk's activation
func (j Job) stageTime(mc Machine, l Layout, s int) stageTime {
	b, T := float64(j.microBatch(l)), float64(j.Seq)
	C, tp := float64(j.Model.Dim), float64(l.TP)
	vt := float64(blockLen(j.Model.Vocab, l.TP, 0))
	blocks := float64(j.Model.Layers / l.PP)
	last := s == l.PP-1

	flops := blocks * b * T * 3 * (24*C*C + 4*T*C) / tp
	if last {
		flops += b * T * 3 * 2 * C * vt
	}
	var st stageTime
	rep := blocks * b * T * mc.Replicated
	if l.SeqParallel {
		rep /= tp
	}
	st.compute = flops/mc.Flops + rep

	tpLink := j.pick(mc, j.tpCrosses(l, s))
	act := b * T * C * bytesPerFloat
	reduces := 4 * blocks
	if s == 0 {
		reduces++
	}
	if last {
		reduces++
		st.tp += 3 * tpLink.allReduce(l.TP, b*T*bytesPerFloat)
	}
	st.tp += reduces * tpLink.allReduce(l.TP, act)

	msg := act
	if l.SeqParallel {
		msg /= tp
	}
	fwd, bwd := j.ppMessages(l, s)
	p := l.PP
	st.pp = float64(fwd)*j.pick(mc, j.ppCrosses(l, s, (s+1)%p)).send(msg) +
		float64(bwd)*j.pick(mc, j.ppCrosses(l, s, (s+p-1)%p)).send(msg)
	return st
}

// ppMessages is the activations (to the next stage) and the gradients
// (to the one before) that stage s sends per micro-batch.
func (j Job) ppMessages(l Layout, s int) (fwd, bwd int) {
	if l.PP == 1 {
		return 0, 0
	}
	if l.Schedule == ScheduleInterleaved {
		fwd, bwd = l.Virtual, l.Virtual
	} else {
		fwd, bwd = 1, 1
	}
	if s == l.PP-1 {
		fwd--
	}
	if s == 0 {
		bwd--
	}
	return fwd, bwd
}

// dpTime is the data-parallel communication of stage s per step, TP rank
// 0's gradients of n = 4 bytes a parameter over DP ranks (ring):
//
//	ZeRO 0: one all-reduce of n
//	ZeRO 1: a reduce-scatter and an all-gather, the same time
//	ZeRO 2: a reduce-scatter every micro-batch (as the engine does) and
//	        an all-gather of the updated parameters: (m+1)/2 all-reduces
//	ZeRO 3: every micro-batch a reduce-scatter and two all-gathers of the
//	        parameters (forward and backward): 1.5·m all-reduces
//
// not overlapped with compute.
func (j Job) dpTime(mc Machine, l Layout, s int) float64 {
	n := float64(j.rankUnits(l, s, 0).total()) * bytesPerFloat
	k := j.pick(mc, j.dpCrosses(l, s))
	half, m := k.half(l.DP, n), float64(l.Micro)
	switch l.Zero {
	case 2:
		return (m + 1) * half
	case 3:
		return 3 * m * half
	default:
		return 2 * half
	}
}

// optimizerTime is AdamW's step on stage s's TP rank 0: 28 bytes read
// and written a parameter it updates (16 read: parameter, gradient, m, v;
// 12 written: parameter, m, v), its ZeRO share from stage 1, over
// Machine.MemBandwidth; 0 when that is 0.
func (j Job) optimizerTime(mc Machine, l Layout, s int) float64 {
	if mc.MemBandwidth == 0 {
		return 0
	}
	u := j.rankUnits(l, s, 0)
	n := u.total()
	if l.Zero >= 1 {
		n = u.sharded(int64(l.DP))
	}
	return float64(n) * (16 + 12) / mc.MemBandwidth
}
