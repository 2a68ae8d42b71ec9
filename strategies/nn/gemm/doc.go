// Package gemm is a single-threaded float32 matrix product for the
// training loops of gorun's strategies: Sgemm computes
// C = alpha·op(A)·op(B) + beta·C on row-major matrices with the semantics
// of gonum's blas.Float32 Sgemm, and Implementation plugs it into
// gonum's blas32 in place of gonum's own.
//
// # How
//
// The product is blocked and packed as BLIS does it. Columns of C go nc at
// a time; the inner dimension at most kc at a time, in even steps (with kc
// 384, 784 goes as 3×262, not 384+384+16), each step packing a kc×nc
// panel of op(B)
// into micro-panels of nr columns; rows mc at a time, packing an mc×kc
// block of op(A) into micro-panels of mr rows; and then a micro-kernel
// takes each mr×nr tile of C through the kc steps in registers. Packing
// absorbs the transposes, so all four combinations of blas.NoTrans and
// blas.Trans run the same kernel. Each micro-panel is packed just before
// its first use; when all of op(A) fits one block (the batch-64 shapes)
// the B micro-panels share one buffer that stays in L1. Tiles cut by the
// edge of C run whole on zero-padded panels into a scratch tile that is
// then added in. Packing buffers come from a sync.Pool: steady calls do
// not allocate.
//
// The micro-kernel is picked at run time (Arch says which):
//
//   - avx512: AVX-512F (kernel512_amd64.s), an 8×32 tile in 16 ZMM sums;
//     mc 128, kc 256, nc 4096.
//   - avx2: AVX2 and FMA (kernel_amd64.s), a 6×16 tile in 12 YMM sums;
//     mc 144, kc 384, nc 4096.
//   - go: anything else, other architectures included: a 2×4 tile in Go;
//     mc 128, kc 256, nc 2048.
//
// The vector archs pack B, and the avx512 arch A, with AVX2 row copies and
// 8×8 transposes (pack_amd64.s); the rest packs in Go.
//
// # Speed
//
// On one core of the AMD EPYC (Zen 5) that this was written on, timed by
// process CPU time (the machine is shared; see BenchmarkSgemm), against
// gonum v0.17.0's Sgemm on the same core, in GFLOP/s:
//
//	shape (m×n×k, op)               avx512    avx2    go   gonum
//	X·W        64×1024×784  NN       130-168   68-83    5   12-13
//	X·W        64×1024×1024 NN       130-160   78-86    5   12-13
//	X·W        64×10×1024   NN        35-40      19     4       4
//	Xᵀ·dY      784×1024×64  TN       169-181   87-96    6      12
//	dY·Wᵀ      64×784×1024  NT       146-166   87-91    5   13-14
//	dY·Wᵀ      64×1024×1024 NT       161-167      88    5      14
//	X·Wᵀ       64×1024×784  NT       167-170   84-91    5   14-15
//	attention  256×256×64   NT       135-199   64-87    6      15
//
// The two FMA pipes of a Zen 5 core peak at about 100 GFLOP/s with AVX2
// and 200 with AVX-512. On one core of an idle Intel Xeon server CPU the
// MLP shapes other than the 64×10 output layer ran at 82-137 (avx512),
// 52-78 (avx2) and 6-14 (gonum).
//
// # Layout of weights
//
// Neither layout of a layer's weights W is faster. Stored inputs×outputs
// (k×n), the forward pass X·W packs B by copying rows and the backward
// pass dY·Wᵀ packs it by 8×8 transposes; stored outputs×inputs the two
// swap. The transposing packer reads B's rows sequentially and the
// copying one strides down B's columns, and the two come out within the
// noise of each other (X·W and X·Wᵀ above), so a training step costs the
// same either way. The weight gradient Xᵀ·dY packs A transposed, which is
// the cheap direction. Keep whichever layout the rest of the code wants.
//
// # Concurrency and errors
//
// Sgemm runs on the calling goroutine and is safe for concurrent use:
// callers that want several cores split C's rows or columns among
// goroutines. Bad arguments panic with gonum's messages where gonum's
// Sgemm does: that is the blas.Float32 contract, kept here rather than the
// house rule of returning errors.
package gemm
