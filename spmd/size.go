package spmd

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSize reads a byte count with an optional K, M or G suffix (powers
// of 1024; KiB, MiB, GiB and a trailing B are accepted too), as
// GORUN_SHM_SINGLE_COPY and the examples' size flags take them.
func ParseSize(s string) (int, error) {
	t := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSpace(s), "B"), "i")
	mult := 1
	if len(t) > 0 {
		switch t[len(t)-1] {
		case 'K', 'k':
			mult = 1 << 10
		case 'M', 'm':
			mult = 1 << 20
		case 'G', 'g':
			mult = 1 << 30
		}
		if mult > 1 {
			t = t[:len(t)-1]
		}
	}
	n, err := strconv.Atoi(t)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("%q: want a size such as 8, 4K, 64M or 1G", s)
	}
	return n * mult, nil
}
