// Package suggest finds the name a user probably meant, for the "did you
// mean" of gorun's and goprof's usage errors and of a program that gorun
// does not find on PATH.
package suggest
