//go:build !race

package prims_test

const raceEnabled = false
