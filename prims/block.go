package prims

// Block returns the range [lo, hi) of the elements that rank r of p holds
// when a vector of n elements is cut into p blocks, as ReduceScatter cuts
// it: in rank order, the first n%p ranks hold n/p+1 elements, the others
// n/p.
func Block(n, p, r int) (lo, hi int) {
	q, m := n/p, n%p
	lo = r*q + min(r, m)
	hi = lo + q
	if r < m {
		hi++
	}
	return lo, hi
}

// bounds returns the p+1 block boundaries of Block: block i is
// [b[i], b[i+1]), in the call's first buffer of ints (call.ints).
func (k *call) bounds(n, p int) []int {
	b := k.intsFor(0, p+1)
	for i := range p {
		b[i], _ = Block(n, p, i)
	}
	b[p] = n
	return b
}

// equalBounds returns the boundaries of p blocks of kk elements each, in
// the call's first buffer of ints (call.ints).
func (k *call) equalBounds(kk, p int) []int {
	b := k.intsFor(0, p+1)
	for i := range b {
		b[i] = i * kk
	}
	return b
}

// intsFor returns n ints of the call's buffer i (call.ints), which the
// call's next intsFor(i, ...) overwrites: block boundaries were p+1 ints
// made at every call, which Go keeps on the stack only up to 32 bytes (p
// 3). At np 16 an all-gather's 136 bytes a call, with the probe's
// buffers, set every rank's garbage collector off within a few thousand
// calls: collbench's 1 KiB all-gathers, the pass that met it, took 10-12
// us against 3 at 512 B and 2 KiB on 16 cores (bench/results/manycore.txt).
func (k *call) intsFor(i, n int) []int {
	if cap(k.ints[i]) < n {
		k.ints[i] = make([]int, n)
	}
	return k.ints[i][:n]
}

// mod returns a mod p in 0..p-1.
func mod(a, p int) int { return ((a % p) + p) % p }

// copyIn copies src into dst unless they are the same memory.
func copyIn[T any](dst, src []T) {
	if len(dst) > 0 && len(src) > 0 && &dst[0] == &src[0] {
		return
	}
	copy(dst, src)
}
