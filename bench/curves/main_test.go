package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/curves.golden.svg")

// file writes body to name in a fresh temporary folder and returns its path.
func file(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParseSteps(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want []point
	}{
		{"ddp", `step 1 loss 2.305911 samples/s 1509.8
step 2 loss 2.269336 samples/s 4260.0
final loss 2.269336
`, []point{{1, 2.305911}, {2, 2.269336}}},
		{"gpt", `compression topk:0.01 sent 100 bytes a step of 1000 (ratio 10.0)
step 1 loss 5.1987 tokens/s 1977
step 2 loss 4.8572 tokens/s 5197
stage 0 in-flight 4 activations 1024 bubble 20.0% (formula 18.0%, simulated 19.0%)
`, []point{{1, 5.1987}, {2, 4.8572}}},
		{"junk between", `warming up
step
step 3 loss x samples/s 1
step 4 loss 1.5 samples/s
step 5 loss 1.5 bytes/s 10
step -1 loss 1.5 samples/s 10
  step 6 loss 1.25 samples/s 10  
[rank 1] step 7 loss 9 samples/s 10
`, []point{{6, 1.25}}},
		{"resumed", `step 1 loss 3 samples/s 1
step 2 loss 2 samples/s 1
step 3 loss 1.9 samples/s 1
restart 1: resuming from step 2
step 3 loss 1.5 samples/s 1
step 4 loss 1 samples/s 1
`, []point{{1, 3}, {2, 2}, {3, 1.5}, {4, 1}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseSteps(strings.NewReader(tc.in))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestParseStepsJunkOnly(t *testing.T) {
	_, err := parseSteps(strings.NewReader("final loss 2.3\nhello\n\n"))
	if !errors.Is(err, errNoSteps) {
		t.Fatalf("got %v, want errNoSteps", err)
	}
}

func TestSmooth(t *testing.T) {
	pts := []point{{1, 4}, {2, 2}, {3, 6}, {4, 0}}
	want := []point{{1, 4}, {2, 3}, {3, 4}, {4, 3}}
	if got := smooth(pts, 2); !reflect.DeepEqual(got, want) {
		t.Errorf("smooth 2: got %v, want %v", got, want)
	}
	if got := smooth(pts, 1); !reflect.DeepEqual(got, pts) {
		t.Errorf("smooth 1: got %v, want %v", got, pts)
	}
}

func TestTable(t *testing.T) {
	all := []series{
		{"none", []point{{1, 3}, {2, 2}}},
		{"fp16", []point{{1, 3}, {2, 2.008}}},
		{"topk:0.01", []point{{1, 3}, {2, 2.5}, {3, 1.9}}},
	}
	var b strings.Builder
	table(&b, all, 1)
	want := `# name     steps  final_loss   vs_none
none           2           2  baseline
fp16           2       2.008     +0.4%
topk:0.01      3         1.9     -5.0%
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
}

func TestRelative(t *testing.T) {
	for _, tc := range []struct {
		v, base float64
		want    string
	}{
		{2, 2, "+0.0%"}, {2.5, 2, "+25.0%"}, {1, 2, "-50.0%"}, {1, 0, "-"}, {0, 0, "-"},
	} {
		if got := relative(tc.v, tc.base); got != tc.want {
			t.Errorf("relative(%g, %g) = %s, want %s", tc.v, tc.base, got, tc.want)
		}
	}
}

// steps prints a ddp-style run of n steps with losses from f.
func steps(n, from int, f func(i int) float64, unit string) string {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, "step %d loss %.6f %s 1000.0\n", from+i, f(i), unit)
	}
	return b.String()
}

func TestGoldenSVG(t *testing.T) {
	dir := t.TempDir()
	none := file(t, dir, "none", steps(20, 1, func(i int) float64 { return 2.3 / (1 + 0.1*float64(i)) }, "samples/s"))
	fp16 := file(t, dir, "fp16", steps(20, 1, func(i int) float64 { return 2.31 / (1 + 0.1*float64(i)) }, "samples/s"))
	topk := file(t, dir, "topk", "starting\n"+steps(15, 0, func(i int) float64 { return 2.3 / (1 + 0.05*float64(i)) }, "tokens/s"))
	out := filepath.Join(dir, "out.svg")
	var stdout, stderr strings.Builder
	err := run([]string{"-o", out, "-title", "MLP <np 4>", "none=" + none, "fp16=" + fp16, "topk:0.01=" + topk}, &stdout, &stderr)
	if err != nil {
		t.Fatal(err)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout has %q, want nothing (the SVG went to -o)", stdout.String())
	}
	if !strings.Contains(stderr.String(), "vs_none") {
		t.Errorf("stderr has %q, want the table", stderr.String())
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "curves.golden.svg")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (go test -update writes it)", err)
	}
	if string(got) != string(want) {
		t.Errorf("SVG differs from %s (go test -update rewrites it); got:\n%s", golden, got)
	}
}

func TestTableFlagAndSmooth(t *testing.T) {
	dir := t.TempDir()
	a := file(t, dir, "a", "step 1 loss 4 samples/s 1\nstep 2 loss 2 samples/s 1\n")
	out := filepath.Join(dir, "out.svg")
	var stdout, stderr strings.Builder
	if err := run([]string{"-table", "-smooth", "2", "-o", out, "a=" + a}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "mean over the last 2 steps") || !strings.Contains(stdout.String(), "a           2           3  baseline") {
		t.Errorf("stdout has %q, want the table of smoothed losses", stdout.String())
	}
	if stderr.Len() != 0 {
		t.Errorf("stderr has %q, want nothing", stderr.String())
	}
	svg, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(svg), "mean of the last 2 steps") || !strings.Contains(string(svg), ">a 3</text>") {
		t.Errorf("the legend says neither the smoothing nor the final mean:\n%s", svg)
	}
}

func TestSVGToStdout(t *testing.T) {
	a := file(t, t.TempDir(), "a", "step 0 loss 1 tokens/s 1\n")
	var stdout, stderr strings.Builder
	if err := run([]string{"a=" + a}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(stdout.String(), "<svg") || !strings.HasSuffix(stdout.String(), "</svg>\n") {
		t.Errorf("stdout is not an SVG: %q", stdout.String())
	}
}

func TestErrors(t *testing.T) {
	dir := t.TempDir()
	good := file(t, dir, "good", "step 1 loss 1 samples/s 1\n")
	junk := file(t, dir, "junk", "final loss 2.3\n")
	missing := filepath.Join(dir, "missing")
	for _, tc := range []struct {
		name string
		args []string
		is   error    // nil: any error
		want []string // in the message
	}{
		{"no runs", nil, errArg, []string{"no runs", "NAME=PATH"}},
		{"no =", []string{"a=" + good, good}, errArg, []string{good, "NAME=PATH"}},
		{"empty name", []string{"=" + good}, errArg, []string{good}},
		{"unreadable", []string{"a=" + good, "b=" + missing}, os.ErrNotExist, []string{"run b", missing}},
		{"no steps", []string{"a=" + good, "b=" + junk}, errNoSteps, []string{"run b", junk, "examples/ddp"}},
		{"smooth 0", []string{"-smooth", "0", "a=" + good}, nil, []string{"-smooth 0"}},
		{"table without -o", []string{"-table", "a=" + good}, nil, []string{"-o FILE"}},
		{"bad flag", []string{"-x", "a=" + good}, nil, []string{"-x"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr strings.Builder
			err := run(tc.args, &stdout, &stderr)
			if err == nil {
				t.Fatal("no error")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("%v: want errors.Is %v", err, tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("%q: want %q in it", err, w)
				}
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout has %q, want nothing", stdout.String())
			}
		})
	}
}

func TestHelp(t *testing.T) {
	var stdout, stderr strings.Builder
	if err := run([]string{"-h"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"-o", "-title", "-smooth", "-table"} {
		if !strings.Contains(stdout.String(), f) {
			t.Errorf("usage lacks %s:\n%s", f, stdout.String())
		}
	}
}

func TestNiceScale(t *testing.T) {
	for _, tc := range []struct {
		name           string
		lo, hi, minTik float64
		want           scale
	}{
		{"losses", 1.05, 2.31, 0, scale{1, 2.5, 0.5}},
		{"steps from 1", 1, 60, 1, scale{0, 60, 20}},
		{"few steps", 0, 3, 1, scale{0, 3, 1}},
		{"flat", 2, 2, 0, scale{1.4, 2.6, 0.2}},
		{"nothing", 1, 0, 0, scale{0, 1, 0.2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := niceScale(tc.lo, tc.hi, 5, tc.minTik)
			const eps = 1e-9
			if d := max(abs(got.lo-tc.want.lo), abs(got.hi-tc.want.hi), abs(got.tick-tc.want.tick)); d > eps {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func abs(v float64) float64 { return max(v, -v) }
