package main

import (
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/spmdtest/proctest"

	"github.com/gorun-hpc/gorun/strategies/nn/shardckpt"
)

// small is a model and set that train in a fraction of a second.
var small = []string{"--hidden", "32,24,24", "--examples", "480", "--batch", "24", "--optim", "adamw", "--lr", "0.01"}

// build compiles gorun and this example into a temporary directory.
func build(t *testing.T) (gorun, zero string) {
	t.Helper()
	bins := proctest.Build(t, "../../cmd/gorun", ".")
	return bins[0], bins[1]
}

// job runs the example with args on np ranks under gorun; it returns the
// output and the error.
func job(gorun, zero string, np int, args ...string) (string, string, error) {
	return proctest.Run(gorun, zero, np, args...)
}

func mustJob(t *testing.T, gorun, zero string, np int, args ...string) string {
	t.Helper()
	out, stderr, err := job(gorun, zero, np, args...)
	if err != nil {
		t.Fatalf("-np %d %v: %v\n%s%s", np, args, err, out, stderr)
	}
	return out
}

// losses reads the "step N loss L samples/s S" lines into step -> loss.
func losses(out string) map[int]float64 {
	m := map[int]float64{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 6 && f[0] == "step" && f[2] == "loss" {
			n, _ := strconv.Atoi(f[1])
			v, _ := strconv.ParseFloat(f[3], 64)
			m[n] = v
		}
	}
	return m
}

// TestCrashInSaveThenResume: a job killed in the middle of a save (rank
// 1's shard written, the index not committed) leaves the save before it
// loadable; a job at another size and stage resumes from it and trains as
// the uninterrupted job did.
func TestCrashInSaveThenResume(t *testing.T) {
	gorun, zero := build(t)
	args := append([]string{"--steps", "6"}, small...)
	want := losses(mustJob(t, gorun, zero, 4, append(args, "--zero", "3")...))
	dir := t.TempDir()
	out, stderr, err := job(gorun, zero, 4, append(args, "--zero", "3", "--ckpt", dir, "--ckpt-every", "2", "--crash-in-save", "2")...)
	if err == nil {
		t.Fatalf("the job whose rank 1 died in its second save succeeded:\n%s%s", out, stderr)
	}
	ix, err := shardckpt.Open(dir)
	if err != nil {
		t.Fatalf("the checkpoint before the crash is not loadable: %v", err)
	}
	if ix.Meta()["step"] != "2" {
		t.Fatalf("the checkpoint is of step %s, want 2", ix.Meta()["step"])
	}
	out = mustJob(t, gorun, zero, 2, append(args, "--zero", "1", "--ckpt", dir, "--resume")...)
	if !strings.Contains(out, "resuming from step 2") {
		t.Fatalf("no resume line:\n%s", out)
	}
	got := losses(out)
	for s := 3; s <= 6; s++ {
		if g, ok := got[s]; !ok || math.Abs(g-want[s]) > 1e-5*want[s]+1e-6 {
			t.Errorf("step %d: loss %v (present %v) after resuming at 2 ranks, %v uninterrupted at 4", s, g, ok, want[s])
		}
	}
}

// TestRestartAfterCrashInSave: under gorun --max-restarts, --crash-in-save
// kills the first start only: the restarted job resumes from the save
// before the crash and finishes. A run asked for no more steps than the
// checkpoint's then trains nothing and says so.
func TestRestartAfterCrashInSave(t *testing.T) {
	gorun, zero := build(t)
	dir := t.TempDir()
	args := append([]string{"-np", "2", "--max-restarts", "1", "--timeout", "2m", zero, "--steps", "6", "--ckpt", dir, "--ckpt-every", "2", "--resume", "--crash-in-save", "2"}, small...)
	out, err := exec.Command(gorun, args...).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "resuming from step 2") || !strings.Contains(string(out), "final loss ") {
		t.Fatalf("gorun: %v, want a restart that resumes from step 2 and finishes:\n%s", err, out)
	}
	got := mustJob(t, gorun, zero, 2, append([]string{"--steps", "3", "--ckpt", dir, "--resume"}, small...)...)
	if !strings.Contains(got, "is at step 6, at or past --steps 3: nothing to train") || strings.Contains(got, "loss") {
		t.Errorf("--resume --steps 3 from step 6 printed:\n%s", got)
	}
}

// TestMemoryLines: each stage prints a memory line per rank, and what it
// shards shrinks by the number of ranks.
func TestMemoryLines(t *testing.T) {
	gorun, zero := build(t)
	const np = 4
	mem := map[string][np][5]int64{}
	for _, flags := range [][]string{{"--zero", "0"}, {"--zero", "1"}, {"--zero", "2"}, {"--zero", "3"}, {"--shard", "full", "--mixed", "bf16"}} {
		out := mustJob(t, gorun, zero, np, append([]string{"--steps", "2", "--hidden", "128,128,128,128"}, append(small[2:], flags...)...)...)
		var m [np][5]int64
		n := 0
		for _, l := range strings.Split(out, "\n") {
			var r int
			var v [5]int64
			if _, err := fmt.Sscanf(l, "memory rank %d params %d grads %d optim %d peak %d heap %d", &r, &v[0], &v[1], &v[2], &v[3], &v[4]); err == nil && r >= 0 && r < np {
				m[r] = v
				n++
			}
		}
		if n != np {
			t.Fatalf("%v: %d memory lines, want %d:\n%s", flags, n, np, out)
		}
		mem[strings.Join(flags, " ")] = m
	}
	near := func(label string, got, want int64) {
		if math.Abs(float64(got-want)) > 0.1*float64(want) {
			t.Errorf("%s: %d bytes, want about %d", label, got, want)
		}
	}
	ddp := mem["--zero 0"][0]
	for r := range np {
		near(fmt.Sprintf("stage 1 rank %d optim", r), mem["--zero 1"][r][2], ddp[2]/np)
		near(fmt.Sprintf("stage 2 rank %d grads", r), mem["--zero 2"][r][1], ddp[1]/np)
		near(fmt.Sprintf("stage 3 rank %d params", r), mem["--zero 3"][r][0], ddp[0]/np)
		near(fmt.Sprintf("bf16 stage 3 rank %d params", r), mem["--shard full --mixed bf16"][r][0], ddp[0]/np/2)
	}
}

// TestHeapMatchesAccount: on real processes, what each rank keeps is the
// ZeRO paper's formula (within 10%), stage by stage, for a 10M-parameter
// MLP on 4 ranks, and its Go heap after a step is what zero.Memory
// accounts for at its peak (the driver keeps its temporaries for the next
// step) plus at most 16 MiB that is not the model's: activations, GEMM
// packing buffers, the data set (about 5-10 MiB here). The collectives'
// algorithms are pinned to the ring, whose scratch is one segment: which
// algorithm the model picks depends on the link constants measured at
// start-up, which load changes, and a tree's or a linear all-reduce's root
// keeps whole buffers of scratch for the communicator's next calls (20 MB
// more on rank 0 once, on a loaded machine).
func TestHeapMatchesAccount(t *testing.T) {
	t.Setenv("GORUN_ALGO", "allreduce=ring,reducescatter=ring,allgather=ring,broadcast=ring")
	gorun, zero := build(t)
	const np = 4
	hidden := strings.TrimSuffix(strings.Repeat("1024,", 10), ",")
	for stage := range 4 {
		out := mustJob(t, gorun, zero, np, "--zero", fmt.Sprint(stage), "--steps", "1", "--hidden", hidden,
			"--examples", "256", "--batch", "16", "--optim", "adamw")
		var psi float64
		n := 0
		for _, l := range strings.Split(out, "\n") {
			var r int
			var p, g, o, peak, heap float64
			if _, err := fmt.Sscanf(l, "memory rank %d params %g grads %g optim %g peak %g heap %g", &r, &p, &g, &o, &peak, &heap); err != nil {
				continue
			}
			n++
			if psi == 0 {
				psi = p / 4 // rank 0's fp32 parameters
				if stage == 3 {
					psi *= np
				}
			}
			want := map[int]float64{0: 16 * psi, 1: 8*psi + 8*psi/np, 2: 4*psi + 12*psi/np, 3: 16 * psi / np}[stage]
			if kept := p + g + o; math.Abs(kept-want) > 0.1*want {
				t.Errorf("stage %d rank %d keeps %.0f bytes, formula %.0f", stage, r, kept, want)
			}
			if heap < 0.98*peak || heap > peak+16<<20 {
				t.Errorf("stage %d rank %d: Go heap %.0f bytes, want the accounted peak %.0f plus up to 16 MiB", stage, r, heap, peak)
			}
		}
		if n != np {
			t.Fatalf("stage %d: %d memory lines, want %d:\n%s", stage, n, np, out)
		}
	}
}

// TestCompressFlag: --compress fp16 at stage 2 (a reduce-scatter in 16
// bits) and topk at stage 3 train (the loss down 10% in 24 steps) and report their bytes; fp16's loss
// stays within 1% of the uncompressed job's; a codec with --mixed, or a
// name that is none, is refused with the flag named.
func TestCompressFlag(t *testing.T) {
	gorun, zero := build(t)
	const steps = 24
	args := append([]string{"--steps", strconv.Itoa(steps)}, small...)
	want := losses(mustJob(t, gorun, zero, 3, append(args, "--zero", "2")...))
	for _, tc := range []struct{ stage, codec, ratio string }{{"2", "fp16", "(ratio 2.0)"}, {"3", "topk:0.05", "(ratio 10.0)"}} {
		out := mustJob(t, gorun, zero, 3, append(args, "--zero", tc.stage, "--compress", tc.codec)...)
		if !strings.Contains(out, "compression "+tc.codec+" sent") || !strings.Contains(out, tc.ratio) {
			t.Errorf("--zero %s --compress %s: no compression line with %s:\n%s", tc.stage, tc.codec, tc.ratio, out)
		}
		got := losses(out)
		if len(got) != steps || !(got[steps] < 0.9*got[1]) {
			t.Errorf("--compress %s did not train: %v", tc.codec, got)
		}
		if tc.codec == "fp16" && math.Abs(got[steps]-want[steps]) > 0.01*want[steps] {
			t.Errorf("--compress fp16: final loss %.6f, uncompressed %.6f", got[steps], want[steps])
		}
	}
	for _, bad := range [][]string{{"--compress", "fp16", "--mixed", "bf16"}, {"--compress", "gzip"}} {
		out, stderr, err := job(gorun, zero, 2, append(args, bad...)...)
		if err == nil || !strings.Contains(stderr, "--compress") {
			t.Errorf("%v: err %v, want a refusal naming --compress:\n%s%s", bad, err, out, stderr)
		}
	}
}

// TestWrongCheckpoint: resuming a checkpoint saved with another optimizer,
// or examples/ddp's directory, fails saying what to do.
func TestWrongCheckpoint(t *testing.T) {
	gorun, zero := build(t)
	dir, single := t.TempDir(), t.TempDir()
	mustJob(t, gorun, zero, 0, append([]string{"--steps", "2", "--ckpt", dir}, small...)...)
	if err := os.WriteFile(filepath.Join(single, "checkpoint.safetensors"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"other optimizer", []string{"--ckpt", dir, "--optim", "sgd"},
			filepath.Join(dir, shardckpt.IndexFile) + ": checkpoint does not match: it was saved with adamw; this run uses sgd: pass --optim adamw, or another --ckpt"},
		{"ddp's directory", []string{"--ckpt", single},
			"--resume: " + single + " holds a ddp (single-file) checkpoint, checkpoint.safetensors, not a sharded one: resume it with examples/ddp"},
	}
	for _, c := range cases {
		args := append(append([]string{"--steps", "4", "--resume"}, small...), c.args...)
		out, stderr, err := job(gorun, zero, 0, args...)
		if err == nil || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: %v, want an error saying %q:\n%s%s", c.name, err, c.want, out, stderr)
		}
	}
}

// TestBadCheckpointDir: a --ckpt that cannot hold the checkpoint (a
// regular file) fails at start-up, before any step, with a line naming
// --ckpt and the path.
func TestBadCheckpointDir(t *testing.T) {
	gorun, zero := build(t)
	file := filepath.Join(t.TempDir(), "afile")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, stderr, err := job(gorun, zero, 2, append([]string{"--steps", "3", "--ckpt", file}, small...)...)
	if want := "zero: --ckpt " + file + ": it is a file, not a directory"; err == nil || !strings.Contains(stderr, want) || strings.Contains(out, "step 1 ") {
		t.Errorf("--ckpt %s: %v, want a failure before step 1 saying %q:\n%s%s", file, err, want, out, stderr)
	}
}

// TestFlagsDiffer: an MPMD job whose ranks run with different flags fails
// at start on every rank, naming the flag and the ranks, where it hung in
// collectives that did not match.
func TestFlagsDiffer(t *testing.T) {
	gorun, zero := build(t)
	args := append(append(append([]string{"--timeout", "1m", "-np", "1", zero, "--zero", "3"}, small...), ":", "-np", "1", zero, "--zero", "1"), small...)
	cmd := exec.Command(gorun, args...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	want := "zero: rank 1 runs with --zero=1 but rank 0 with --zero=3: give every rank of the job the same flags"
	if code := cmd.ProcessState.ExitCode(); err == nil || code != 1 || !strings.Contains(string(out), want) {
		t.Errorf("gorun %q: want status 1 and %q, got %d:\n%s", args, want, code, out)
	}
}
