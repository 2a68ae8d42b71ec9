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
// [b[i], b[i+1]).
func bounds(n, p int) []int {
	b := make([]int, p+1)
	for i := range p {
		b[i], _ = Block(n, p, i)
	}
	b[p] = n
	return b
}

// equalBounds returns the boundaries of p blocks of k elements each.
func equalBounds(k, p int) []int {
	b := make([]int, p+1)
	for i := range b {
		b[i] = i * k
	}
	return b
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
