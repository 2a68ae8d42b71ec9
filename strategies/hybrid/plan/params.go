package plan

// Parameter counts, per rank of a layout. A block has 12C² + 13C
// parameters: ln_1 and ln_2 (2C each), attn.c_attn [C,3C] + 3C, attn.c_proj
// [C,C] + C, mlp.c_fc [C,4C] + 4C and mlp.c_proj [4C,C] + C. TP splits
// the four matrices and the biases of c_attn and c_fc (12C² + 7C, which
// TP divides since it divides the heads and so C) and replicates the
// LayerNorms and the row-parallel c_proj biases (6C). The embeddings are
// wte [V,C], split by vocabulary rows, and wpe [Context,C], replicated;
// the head is ln_f (2C, replicated) and lm_head [C,V], split by
// vocabulary columns. A vocabulary that TP does not divide is cut as
// prims.Block cuts: the first V mod TP ranks get one row more.

// units is what one rank holds, in parameters, by unit: the units ZeRO
// shards and gathers one at a time.
type units struct {
	blocks int64 // transformer blocks on the rank
	block  int64 // parameters of one of them
	embed  int64 // wte's rows and wpe on the first stage, else 0
	head   int64 // ln_f and lm_head's columns on the last stage, else 0
}

// total is the rank's parameters.
func (u units) total() int64 { return u.blocks*u.block + u.embed + u.head }

// largest is the parameters of the rank's largest unit.
func (u units) largest() int64 {
	n := max(u.embed, u.head)
	if u.blocks > 0 {
		n = max(n, u.block)
	}
	return n
}

// sharded is the parameters the rank keeps of its units when each is
// cut into d equal chunks, padded: the sum of ⌈unit/d⌉.
func (u units) sharded(d int64) int64 {
	ceil := func(n int64) int64 { return (n + d - 1) / d }
	return u.blocks*ceil(u.block) + ceil(u.embed) + ceil(u.head)
}

// rankUnits is what TP rank t of pipeline stage s holds under l.
func (j Job) rankUnits(l Layout, s, t int) units {
	C := int64(j.Model.Dim)
	tp := int64(l.TP)
	vocab := int64(blockLen(j.Model.Vocab, l.TP, t))
	u := units{
		blocks: int64(j.Model.Layers / l.PP),
		block:  (12*C*C+7*C)/tp + 6*C,
	}
	if s == 0 {
		u.embed = vocab*C + int64(j.Model.Context)*C
	}
	if s == l.PP-1 {
		u.head = C*vocab + 2*C
	}
	return u
}

// replicated is the parameters every TP rank of a replica holds whole:
// the blocks' LayerNorms and row-parallel biases, wpe and ln_f.
func (j Job) replicated() int64 {
	C := int64(j.Model.Dim)
	return int64(j.Model.Layers)*6*C + int64(j.Model.Context)*C + 2*C
}

// blockLen is the length of block r of n cut into p as prims.Block cuts
// it: n/p, and one more for the first n mod p.
func blockLen(n, p, r int) int {
	if r < n%p {
		return n/p + 1
	}
	return n / p
}
