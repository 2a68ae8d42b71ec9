// Package compress holds the number formats and gradient compressors of
// gorun's training drivers. So far it has bfloat16 (bf16): the upper half
// of an IEEE float32, kept as a uint16, which strategies/zero's mixed
// precision stores parameters and gradients in and reduces in.
package compress
