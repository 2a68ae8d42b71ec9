package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/spmdtest/proctest"
	"github.com/gorun-hpc/gorun/strategies/nn/data"
)

// small is a model that trains in a fraction of a second, on a little of
// the Go source.
var small = []string{"--layers", "4", "--heads", "4", "--embd", "32", "--block", "16", "--batch", "8", "--max-bytes", "65536", "--steps", "3"}

func build(t *testing.T) (gorun, gpt string) {
	t.Helper()
	bins := proctest.Build(t, "../../cmd/gorun", ".")
	return bins[0], bins[1]
}

func job(gorun, gpt string, np int, args ...string) (string, string, error) {
	return proctest.Run(gorun, gpt, np, args...)
}

// losses reads the "step N loss L tokens/s S" lines.
func losses(t *testing.T, out string) []float64 {
	t.Helper()
	var ls []float64
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 6 && f[0] == "step" && f[2] == "loss" && f[4] == "tokens/s" {
			v, err := strconv.ParseFloat(f[3], 64)
			if err != nil {
				t.Fatalf("line %q: %v", l, err)
			}
			ls = append(ls, v)
		}
	}
	return ls
}

// TestLayouts: the same job at 1 rank and on 4 ranks in several layouts
// prints the same losses (to the 4 decimals printed, give or take one in
// the last), a step line per step and the final loss.
func TestLayouts(t *testing.T) {
	gorun, gpt := build(t)
	out, stderr, err := job(gorun, gpt, 1, small...)
	if err != nil {
		t.Fatalf("one rank: %v\n%s%s", err, out, stderr)
	}
	want := losses(t, out)
	if len(want) != 3 || !strings.Contains(out, "final loss ") {
		t.Fatalf("one rank printed:\n%s", out)
	}
	for _, layout := range [][]string{
		{"--tp", "2", "--pp", "2"},
		{"--tp", "2", "--dp", "2", "--seq-parallel", "--zero", "1"},
		{"--pp", "2", "--dp", "2", "--schedule", "gpipe"},
		{"--pp", "2", "--schedule", "interleaved", "--virtual", "2", "--dp", "2"},
	} {
		t.Run(strings.Join(layout, " "), func(t *testing.T) {
			out, stderr, err := job(gorun, gpt, 4, append(append([]string{}, small...), layout...)...)
			if err != nil {
				t.Fatalf("%v\n%s%s", err, out, stderr)
			}
			got := losses(t, out)
			if len(got) != len(want) {
				t.Fatalf("%d step lines, want %d:\n%s", len(got), len(want), out)
			}
			for i := range want {
				if d := got[i] - want[i]; d > 2e-4 || d < -2e-4 {
					t.Errorf("step %d: loss %.4f, one rank's %.4f", i, got[i], want[i])
				}
			}
		})
	}
}

// TestStatsAndSchedule: --stats prints each stage's in-flight count
// (1F1B: p - stage) and bubble; --print-schedule runs without gorun.
func TestStatsAndSchedule(t *testing.T) {
	gorun, gpt := build(t)
	out, stderr, err := job(gorun, gpt, 2, append(append([]string{}, small...), "--pp", "2", "--microbatches", "4", "--stats")...)
	if err != nil {
		t.Fatalf("%v\n%s%s", err, out, stderr)
	}
	for _, want := range []string{"stage 0 in-flight 2 activations ", "stage 1 in-flight 1 activations ", "(formula 20.0%, simulated "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	sched, err := exec.Command(gpt, "--print-schedule", "--pp", "2", "--microbatches", "3").CombinedOutput()
	if err != nil || !strings.Contains(string(sched), "stage 1 | .  F0 B0 B0 F1 B1 B1 F2 B2 B2") {
		t.Errorf("--print-schedule: %v\n%s", err, sched)
	}
}

// TestBadFlags: mistakes are errors that name the flag and what to do,
// from every rank before any training.
func TestBadFlags(t *testing.T) {
	gorun, gpt := build(t)
	for _, tc := range []struct {
		np   int
		args []string
		want string
	}{
		{2, []string{"--tp", "3"}, "gpt: 2 ranks are not a multiple of --tp 3 x --pp 1 = 3"},
		{4, []string{"--tp", "4", "--heads", "6", "--embd", "36"}, "6 heads do not divide over tp 4"},
		{2, []string{"--pp", "2", "--zero", "3"}, "use zero 0 or 1 with a pipeline"},
		{1, []string{"--seq-parallel"}, "needs tp 2 or more"},
		{1, []string{"--schedule", "interleaved", "--virtual", "2"}, "virtual 2 with pp 1"},
		{1, []string{"--layers", "3", "--pp", "1", "--virtual", "2", "--schedule", "interleaved"}, "\ngpt: hybrid: virtual 2 with pp 1"}, // each line of a joined error says the program
		{2, []string{"--pp", "2", "--schedule", "interleaved", "--microbatches", "3"}, "interleaved"},
		{1, []string{"--layers", "3", "--pp", "1", "--vocab", "5"}, "--vocab 5"},
		{1, []string{"--bogus"}, "--help lists the flags"},
		{1, []string{"--mem-limit", "lots"}, "--mem-limit"},
		{2, []string{"--dp", "2", "--microbatches", "3"}, "gpt: --batch 8 does not split into 2 replicas x 3 micro-batches: pass a multiple of 6, replicas x micro-batches"},
		{3, []string{"--batch", "16"}, "gpt: --batch 16 does not split into 3 replicas x 4 micro-batches: pass a multiple of 12,"},
		{3, []string{"--batch", "15"}, "gpt: --batch 15 does not split into 3 replicas x 4 micro-batches: pass a multiple of 12,"},
		// Accepted: saved nothing, or trained to NaN.
		{1, []string{"--ckpt-every", "1"}, "gpt: --ckpt-every 1 needs --ckpt DIR"},
		{1, []string{"--lr", "1e39"}, "gpt: --lr 1e+39: want a positive rate that float32"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, stderr, err := job(gorun, gpt, tc.np, append(append([]string{}, small...), tc.args...)...)
			if err == nil || !strings.Contains(stderr, tc.want) {
				t.Errorf("err %v, stderr lacks %q:\n%s%s", err, tc.want, out, stderr)
			}
		})
	}
}

// TestTokenFile: --data reads a nanoGPT .bin as uint16 tokens, as
// examples/ddp does: it trains on one, refuses one of an odd size, and
// refuses a --vocab below its largest id.
func TestTokenFile(t *testing.T) {
	gorun, gpt := build(t)
	dir := t.TempDir()
	ids := make([]uint16, 4096)
	for i := range ids {
		ids[i] = uint16(i * 7 % 300)
	}
	bin, odd := filepath.Join(dir, "train.bin"), filepath.Join(dir, "odd.bin")
	if err := data.WriteTokens(bin, ids); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(odd, []byte("abc"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := job(gorun, gpt, 1, append(append([]string{}, small...), "--data", bin)...)
	if err != nil || len(losses(t, out)) != 3 {
		t.Errorf("--data %s: %v\n%s%s", bin, err, out, stderr)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--data", odd}, "gpt: --data: token file " + odd + " has 3 bytes, an odd number"},
		{[]string{"--data", bin, "--vocab", "299"}, "gpt: --vocab 299: token file " + bin + " holds ids up to 299: pass at least 300"},
	} {
		out, stderr, err := job(gorun, gpt, 1, append(append([]string{}, small...), tc.args...)...)
		if err == nil || !strings.Contains(stderr, tc.want) {
			t.Errorf("%v: err %v, stderr lacks %q:\n%s%s", tc.args, err, tc.want, out, stderr)
		}
	}
}

// TestDefaultBatch: left out, --batch adapts to the replicas and
// micro-batches, as examples/ddp's does, so the defaults run at 3 ranks;
// where it must grow past its default a note says so.
func TestDefaultBatch(t *testing.T) {
	gorun, gpt := build(t)
	var args []string
	for i := 0; i < len(small); i++ {
		if small[i] == "--batch" {
			i++
			continue
		}
		args = append(args, small[i])
	}
	out, stderr, err := job(gorun, gpt, 3, args...)
	if err != nil || len(losses(t, out)) != 3 || strings.Contains(out, "note:") {
		t.Errorf("3 ranks, default --batch: %v\n%s%s", err, out, stderr)
	}
	out, stderr, err = job(gorun, gpt, 2, append(args, "--microbatches", "16")...)
	want := "note: the default batch of 16 does not split into 2 replicas x 16 micro-batches: training with batch 32"
	if err != nil || !strings.Contains(out, want) || len(losses(t, out)) != 3 {
		t.Errorf("2 ranks, 16 micro-batches: %v, want %q\n%s%s", err, want, out, stderr)
	}
}

// TestMemoryCheck: a configuration far beyond the host's memory (a
// context of 100000 tokens: 160 GB of attention probabilities a layer)
// is refused on every rank with one line that says what was estimated,
// what a rank has and which flags to lower, before anything is
// allocated, not by the runtime's out-of-memory crash.
func TestMemoryCheck(t *testing.T) {
	if _, err := os.Stat("/proc/meminfo"); err != nil {
		t.Skip("no /proc/meminfo: gpt checks the memory of Linux hosts only")
	}
	gorun, gpt := build(t)
	out, stderr, err := job(gorun, gpt, 2, append(append([]string{}, small...), "--block", "100000", "--batch", "2", "--microbatches", "1", "--max-bytes", "300000")...)
	for _, want := range []string{"gpt: this configuration needs about ", " GiB a rank (activations ", "--plan's memory model), more than the ", " a rank has (", "over 2 ranks): lower --block 100000"} {
		if err == nil || !strings.Contains(stderr, want) {
			t.Errorf("err %v, stderr lacks %q:\n%s%s", err, want, out, stderr)
		}
	}
	if strings.Contains(stderr, "fatal error") || strings.Contains(stderr, "goroutine ") {
		t.Errorf("the runtime crashed:\n%s", stderr)
	}
}

// TestFlagsDiffer: the ranks of an MPMD job whose gpt flags differ fail
// alike, naming the flag; --tp 2 on one rank ran its own model and printed
// another loss (status 0).
func TestFlagsDiffer(t *testing.T) {
	gorun, gpt := build(t)
	args := append(append(append([]string{"--timeout", "1m", "-np", "1", gpt, "--tp", "2"}, small...), ":", "-np", "1", gpt), small...)
	cmd := exec.Command(gorun, args...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	want := "gpt: rank 1 runs with --tp=1 but rank 0 with --tp=2: give every rank of the job the same flags"
	if code := cmd.ProcessState.ExitCode(); err == nil || code != 1 || !strings.Contains(string(out), want) {
		t.Errorf("gorun %q: want status 1 and %q, got %d:\n%s", args, want, code, out)
	}
}
