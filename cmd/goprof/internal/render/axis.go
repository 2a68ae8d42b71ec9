package render

import (
	"math"
	"strconv"
)

// tickStep returns a step for the ticks of a time axis span ns long that
// gives about n ticks: 1, 2 or 5 times a power of ten nanoseconds.
func tickStep(span int64, n int) int64 {
	if span <= 0 || n <= 0 {
		return 1
	}
	raw := float64(span) / float64(n)
	pow := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if s := m * pow; s >= raw {
			return max(int64(math.Round(s)), 1)
		}
	}
	return max(int64(math.Round(10*pow)), 1)
}

// timeUnit returns the unit that labels ticks step ns apart: ns, µs, ms
// or s, and how many ns it is.
func timeUnit(step int64) (string, int64) {
	switch {
	case step < 1e3:
		return "ns", 1
	case step < 1e6:
		return "µs", 1e3
	case step < 1e9:
		return "ms", 1e6
	}
	return "s", 1e9
}

// tickLabel writes t ns in unit (of perUnit ns) as briefly as it is
// exact: 0, 250µs, 1.5ms.
func tickLabel(t int64, unit string, perUnit int64) string {
	if t == 0 {
		return "0"
	}
	return strconv.FormatFloat(float64(t)/float64(perUnit), 'f', -1, 64) + unit
}

// ticks returns the times of the ticks between from and to, step apart.
func ticks(from, to, step int64) []int64 {
	var ts []int64
	t := (from + step - 1) / step * step
	if from < 0 {
		t = from / step * step
	}
	for ; t <= to; t += step {
		ts = append(ts, t)
	}
	return ts
}
