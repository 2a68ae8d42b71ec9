// Package kernel holds the element-wise reductions that prims' ops run:
// AVX2 kernels where the CPU has them (add_amd64.s), gonum's assembly for
// floats elsewhere, and Go loops for the rest. It depends on nothing else
// of gorun, so that topo times the very sum the collectives run when it
// fits gamma.
//
// Every function folds src into dst element by element, dst[i] = dst[i] op
// src[i] for i below len(dst); src must be at least as long as dst. The
// vector kernels do one element-wise operation per element, as the loops
// do, so that results are the same bits either way.
package kernel
