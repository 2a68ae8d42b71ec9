// Package replica holds the check that the data-parallel drivers (dp,
// zero, ps) make at their start: that every rank's replica of the model
// is the same model. A rank whose parameters differ would otherwise take
// rank 0's values into tensors of other shapes and average unrelated
// gradients, or, where the sizes differ, issue collectives that do not
// match.
package replica
