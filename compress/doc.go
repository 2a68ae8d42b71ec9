// Package compress holds the number formats and gradient compressors of
// gorun's training drivers.
//
// Number formats: bfloat16 (BF16, the upper half of an IEEE float32,
// which strategies/zero's mixed precision keeps parameters and gradients
// in) and IEEE binary16 (F16), both rounded to nearest even, converted
// with AVX2 and F16C where the CPU has them and in Go elsewhere.
//
// Compressors: a Codec is a stateful compressor together with the
// collective it needs. Codec.AllReduce replaces a rank's gradient bucket
// with the sum over the ranks of what each one sent, and keeps, per
// bucket key, the error-feedback residual of a lossy codec:
//
//   - fp16, bf16: the bucket all-reduced in the narrow type (each sum
//     rounded once), 2x fewer bytes, no error feedback;
//   - topk:F, randk:F (F is 0.01 if left out): the fraction F of the
//     elements with the largest magnitudes (exchanged as index-value pairs
//     by all-gather), or the same random F on every rank (all-reduced, no
//     indices), with error feedback;
//   - sign: one bit an element and a scale (EF-SignSGD), all-gathered;
//   - qsgd:S (16 if left out): S levels with stochastic, unbiased
//     rounding (QSGD);
//   - powersgd:R (4 if left out): a rank-R approximation of every matrix
//     of the bucket by one power iteration warm-started from the last step
//     (Vogels et al.), with error feedback; vectors and matrices that
//     would not shrink are sent plain. Two all-reduces of the packed
//     factors a bucket.
//
// Parse makes a codec from its name (--compress). strategies/dp's
// WithCompression runs one over DDP's buckets; strategies/hybrid over the
// data-parallel groups; any program can call AllReduce on any
// communicator. Payloads that cross the network are decoded as untrusted
// bytes: a decoder checks every length and index and returns an error
// wrapping ErrCorrupt, never panics.
package compress
