package plan

import "math"

// bytesPerFloat is fp32's size: the engine keeps parameters, gradients,
// optimizer state and activations in fp32.
const bytesPerFloat = 4

// memory is what one rank holds, in bytes.
type memory struct {
	params, grads, optim, act int64
}

func (m memory) total() int64 { return m.params + m.grads + m.optim + m.act }

// stateMemory is the parameters, gradients and AdamW state (m and v)
// that TP rank 0 of stage s holds under l (rank 0 gets the largest share
// of an unevenly cut vocabulary): 4, 4 and 8 bytes a parameter, ZeRO
// cutting each unit into DP padded chunks, of the optimizer state from
// stage 1, of the gradients from stage 2 and of the parameters at stage
// 3. Stages 2 and 3 also hold the largest unit's whole gradient before
// its reduce-scatter, and stage 3 its gathered parameters, as temporaries.
func (j Job) stateMemory(l Layout, s int) memory {
	u := j.rankUnits(l, s, 0)
	all, shard, temp := u.total(), u.sharded(int64(l.DP)), u.largest()
	params, grads, optim := all, all, 2*all
	if l.Zero >= 1 {
		optim = 2 * shard
	}
	if l.Zero >= 2 {
		grads = shard + temp
	}
	if l.Zero >= 3 {
		params = shard + temp
	}
	return memory{params: params * bytesPerFloat, grads: grads * bytesPerFloat, optim: optim * bytesPerFloat}
}

// inFlight is how many micro-batches stage s keeps activations for under
// l: in chunks (each of Layers/(PP·Virtual) blocks), in embeddings
// (stage 0) and in logits (the last stage).
//
//	GPipe:       m chunks, m embeddings, m logits
//	1F1B:        min(p-s, m) chunks, min(p, m) embeddings, 1 logits
//	interleaved: min(m·v, 2(p-s-1) + (v-1)·p + 1) chunks (Megatron's
//	             warm-up and the one in steady state),
//	             min(m, ⌈chunks/v⌉) embeddings, 1 logits
func inFlight(l Layout, s int) (chunks, embed, logits int) {
	p, m, v := l.PP, l.Micro, l.Virtual
	switch l.Schedule {
	case ScheduleGPipe:
		return m, m, m
	case ScheduleInterleaved:
		chunks = min(m*v, 2*(p-s-1)+(v-1)*p+1)
		return chunks, min(m, (chunks+v-1)/v), 1
	default:
		return min(p-s, m), min(p, m), 1
	}
}

// actMemory is the activations, in bytes, that TP rank 0 of stage s keeps
// under l for its in-flight micro-batches of b sequences of T tokens:
//
//	per block:   b·T·C·(Rep + Split/TP) + b·H·T²·Score/TP floats
//	             (Rep/TP instead of Rep with sequence parallelism)
//	embeddings:  b·T·C·2 floats (stage 0)
//	logits:      b·T·V_t·3 floats (the last stage; V_t the rank's
//	             vocabulary share, about V/TP)
func (j Job) actMemory(mc Machine, l Layout, s int) int64 {
	k := mc.coeffs()
	b, T := float64(j.microBatch(l)), float64(j.Seq)
	C, H, tp := float64(j.Model.Dim), float64(j.Model.Heads), float64(l.TP)
	rep := k.Rep
	if l.SeqParallel {
		rep /= tp
	}
	perBlock := b*T*C*(rep+k.Split/tp) + b*H*T*T*k.Score/tp
	chunks, embed, logits := inFlight(l, s)
	blocksPerChunk := float64(j.Model.Layers / (l.PP * l.Virtual))
	floats := float64(chunks) * blocksPerChunk * perBlock
	if s == 0 {
		floats += float64(embed) * b * T * C * 2
	}
	if s == l.PP-1 {
		floats += float64(logits) * b * T * float64(blockLen(j.Model.Vocab, l.TP, 0)) * 3
	}
	return toBytes(floats * bytesPerFloat)
}

// toBytes rounds x up to whole bytes, saturating at the largest int64.
func toBytes(x float64) int64 {
	if x >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(math.Ceil(x))
}

// stageMemory is all that TP rank 0 of stage s holds under l.
func (j Job) stageMemory(mc Machine, l Layout, s int) memory {
	m := j.stateMemory(l, s)
	m.act = j.actMemory(mc, l, s)
	return m
}
