package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// errNoSteps is a file without a single step line.
var errNoSteps = errors.New(`no "step N loss L samples/s S" or "step N loss L tokens/s S" lines (the stdout of examples/ddp or examples/gpt)`)

// point is one step of one run.
type point struct {
	step int
	loss float64
}

// series is one run's curve.
type series struct {
	name string
	pts  []point
}

// final is the run's last loss.
func (s series) final() float64 { return s.pts[len(s.pts)-1].loss }

// readSteps reads the step lines of the file at path.
func readSteps(path string) ([]point, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	pts, err := parseSteps(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return pts, nil
}

// parseSteps reads the lines "step N loss L samples/s S" (examples/ddp) and
// "step N loss L tokens/s S" (examples/gpt) and ignores the others. A step
// number that does not go up starts over from it: a resumed run printing
// the steps after its checkpoint again.
func parseSteps(r io.Reader) ([]point, error) {
	var pts []point
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		p, ok := parseStep(sc.Text())
		if !ok {
			continue
		}
		for len(pts) > 0 && pts[len(pts)-1].step >= p.step {
			pts = pts[:len(pts)-1]
		}
		pts = append(pts, p)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(pts) == 0 {
		return nil, errNoSteps
	}
	return pts, nil
}

// parseStep parses one step line; ok is false for any other line.
func parseStep(line string) (p point, ok bool) {
	f := strings.Fields(line)
	if len(f) != 6 || f[0] != "step" || f[2] != "loss" || (f[4] != "samples/s" && f[4] != "tokens/s") {
		return p, false
	}
	step, err1 := strconv.Atoi(f[1])
	loss, err2 := strconv.ParseFloat(f[3], 64)
	if err1 != nil || err2 != nil || step < 0 {
		return p, false
	}
	return point{step: step, loss: loss}, true
}

// smooth returns the trailing moving average over k steps (fewer at the
// start); k of 1 returns pts.
func smooth(pts []point, k int) []point {
	if k <= 1 {
		return pts
	}
	out := make([]point, len(pts))
	sum := 0.0
	for i, p := range pts {
		sum += p.loss
		if i >= k {
			sum -= pts[i-k].loss
		}
		out[i] = point{step: p.step, loss: sum / float64(min(i+1, k))}
	}
	return out
}

// table prints per run its steps, its final loss and how far that is from
// the first run's.
func table(w io.Writer, all []series, k int) {
	nw := len("# name")
	for _, s := range all {
		nw = max(nw, len(s.name))
	}
	if k > 1 {
		fmt.Fprintf(w, "# losses are the mean over the last %d steps\n", k)
	}
	fmt.Fprintf(w, "%-*s %6s %11s %9s\n", nw, "# name", "steps", "final_loss", "vs_"+all[0].name)
	for i, s := range all {
		rel := "baseline"
		if i > 0 {
			rel = relative(s.final(), all[0].final())
		}
		fmt.Fprintf(w, "%-*s %6d %11.5g %9s\n", nw, s.name, len(s.pts), s.final(), rel)
	}
}

// relative formats (v-base)/base as a signed percentage, "-" where that
// is not a number.
func relative(v, base float64) string {
	r := (v - base) / math.Abs(base) * 100
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return "-"
	}
	return fmt.Sprintf("%+.1f%%", r)
}
