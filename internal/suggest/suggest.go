package suggest

// Closest returns the name of names nearest to name, if one is within two
// edits (one for names of up to four letters) that keep a letter of name,
// else "". (A one-letter name is one edit from every other one-letter name:
// -N is not a misspelt -n.)
func Closest(name string, names []string) string {
	best, bestD := "", 3
	if len(name) <= 4 {
		bestD = 2
	}
	for _, n := range names {
		if d := Distance(name, n); d < bestD && d < max(len(name), len(n)) {
			best, bestD = n, d
		}
	}
	return best
}

// Distance is the Levenshtein distance between a and b.
func Distance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
