package main

import (
	"bytes"
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
)

// small is a model and set that train in a fraction of a second.
var small = []string{"--hidden", "32,24", "--examples", "480", "--batch", "24", "--lr", "0.1"}

// build compiles gorun and this example into a temporary directory.
func build(t *testing.T) (gorun, ddp string) {
	t.Helper()
	bins := proctest.Build(t, "../../cmd/gorun", ".")
	return bins[0], bins[1]
}

// job runs ddp with args on np ranks under gorun, or alone for np 0.
func job(t *testing.T, gorun, ddp string, np int, args ...string) string {
	t.Helper()
	out, stderr, err := proctest.Run(gorun, ddp, np, args...)
	if err != nil {
		t.Fatalf("-np %d %v: %v\n%s%s", np, args, err, out, stderr)
	}
	return out
}

// losses reads the "step N loss L samples/s S" lines into step -> loss.
func losses(t *testing.T, out string) map[int]float64 {
	t.Helper()
	m := map[int]float64{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 6 && f[0] == "step" && f[2] == "loss" && f[4] == "samples/s" {
			n, err1 := strconv.Atoi(f[1])
			v, err2 := strconv.ParseFloat(f[3], 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("bad line %q", l)
			}
			m[n] = v
		}
	}
	if !strings.Contains(out, "final loss ") {
		t.Fatalf("no final loss line:\n%s", out)
	}
	return m
}

func sameLosses(t *testing.T, label string, got, want map[int]float64, from, to int) {
	t.Helper()
	for s := from; s <= to; s++ {
		g, ok := got[s]
		if !ok {
			t.Fatalf("%s: no step %d", label, s)
		}
		if math.Abs(g-want[s]) > 1e-5*math.Abs(want[s])+1e-6 {
			t.Errorf("%s: step %d loss %.6f, want %.6f", label, s, g, want[s])
		}
	}
}

// TestProcessesEqualOneProcess: the MLP trained by 2, 3 and 4 processes
// under gorun, over shared memory, matches one process step by step.
func TestProcessesEqualOneProcess(t *testing.T) {
	gorun, ddp := build(t)
	args := append([]string{"--steps", "20"}, small...)
	want := losses(t, job(t, gorun, ddp, 0, args...))
	for _, np := range []int{2, 3, 4} {
		got := losses(t, job(t, gorun, ddp, np, append(args, "--bucket-mb", "0.001")...))
		sameLosses(t, fmt.Sprintf("np %d", np), got, want, 1, 20)
	}
}

// TestGPTEqualsOneProcess: the character-level GPT (tiny, on a small
// text) trained by 2 processes matches one process.
func TestGPTEqualsOneProcess(t *testing.T) {
	gorun, ddp := build(t)
	text := filepath.Join(t.TempDir(), "corpus.txt")
	if err := os.WriteFile(text, bytes.Repeat([]byte("the quick brown fox jumps over the lazy dog.\n"), 40), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"--model", "gpt", "--data", text, "--steps", "8", "--batch", "8", "--context", "16",
		"--layers", "2", "--heads", "2", "--dim", "32", "--optim", "adamw", "--lr", "3e-3", "--bucket-mb", "0.01"}
	want := losses(t, job(t, gorun, ddp, 0, args...))
	got := losses(t, job(t, gorun, ddp, 2, args...))
	sameLosses(t, "gpt np 2", got, want, 1, 8)
}

// TestResume: 10 steps, a checkpoint, then 10 more from it, on 2 ranks,
// train exactly as 20 uninterrupted steps: the same losses and the same
// final checkpoint, byte for byte.
func TestResume(t *testing.T) {
	gorun, ddp := build(t)
	whole, split := t.TempDir(), t.TempDir()
	for _, optim := range []string{"sgd", "adamw"} {
		args := append([]string{"--optim", optim}, small...)
		want := losses(t, job(t, gorun, ddp, 2, append(args, "--steps", "20", "--ckpt", whole)...))
		job(t, gorun, ddp, 2, append(args, "--steps", "10", "--ckpt", split)...)
		got := losses(t, job(t, gorun, ddp, 2, append(args, "--steps", "20", "--ckpt", split, "--resume")...))
		if _, ok := got[10]; ok {
			t.Errorf("%s: the resumed run ran step 10 again", optim)
		}
		sameLosses(t, optim+" resumed", got, want, 11, 20)
		a, _ := os.ReadFile(filepath.Join(whole, ckptFile))
		b, _ := os.ReadFile(filepath.Join(split, ckptFile))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: the resumed run's checkpoint (%d bytes) differs from the uninterrupted run's (%d bytes)", optim, len(b), len(a))
		}
	}
	// The checkpoint is at step 20: --steps 5 from it trains nothing, says
	// so and prints no loss.
	out := job(t, gorun, ddp, 2, append([]string{"--optim", "adamw", "--steps", "5", "--ckpt", split, "--resume"}, small...)...)
	if !strings.Contains(out, "is at step 20, at or past --steps 5: nothing to train") || strings.Contains(out, "loss") {
		t.Errorf("--resume --steps 5 from step 20 printed:\n%s", out)
	}
}

// TestBadCheckpoint: a truncated or corrupted checkpoint, one flipped bit
// in its tensors included, is refused with its name; gorun exits non-zero.
func TestBadCheckpoint(t *testing.T) {
	gorun, ddp := build(t)
	dir := t.TempDir()
	job(t, gorun, ddp, 0, append([]string{"--steps", "2", "--ckpt", dir}, small...)...)
	path := filepath.Join(dir, ckptFile)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)-100] ^= 1 // in the last tensor's data
	bad := map[string][]byte{
		"truncated": good[:len(good)-7],
		"corrupted": append([]byte("{{{{{{{{"), good[8:]...),
		"flipped":   flipped,
	}
	for name, content := range bad {
		if err := os.WriteFile(path, content, 0o644); err != nil {
			t.Fatal(err)
		}
		args := append([]string{"-np", "2", "--timeout", "1m", ddp, "--steps", "4", "--ckpt", dir, "--resume"}, small...)
		out, err := exec.Command(gorun, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), path+": corrupt checkpoint file: ") {
			t.Errorf("%s checkpoint: %v, want an error naming %s and saying it is corrupt:\n%s", name, err, path, out)
		}
	}
}

// TestWrongCheckpoint: resuming a checkpoint of another model or
// optimizer, or a directory of examples/zero's, fails saying what to
// pass; another seed or rate goes on after a notice.
func TestWrongCheckpoint(t *testing.T) {
	gorun, ddp := build(t)
	dir, sharded := t.TempDir(), t.TempDir()
	job(t, gorun, ddp, 0, append([]string{"--steps", "2", "--ckpt", dir}, small...)...)
	if err := os.WriteFile(filepath.Join(sharded, "model.safetensors.index.json"), []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, ckptFile)
	cases := []struct {
		name string
		args []string
		want string
	}{
		{"other optimizer", []string{"--ckpt", dir, "--optim", "adamw"},
			path + ": checkpoint does not match: it was saved with sgd; this run uses adamw: pass --optim sgd, or another --ckpt"},
		{"other model", []string{"--ckpt", dir, "--model", "gpt", "--data", ddp, "--max-bytes", "4096", "--batch", "4", "--context", "8"},
			path + ": checkpoint does not match: it holds an mlp model (784-32-24-10); this run builds gpt ("},
		{"zero's directory", []string{"--ckpt", sharded},
			"--resume: " + sharded + " holds a sharded checkpoint (model.safetensors.index.json, of examples/zero), not a single-file one: resume it with examples/zero"},
	}
	for _, c := range cases {
		args := append(append([]string{"--steps", "4", "--resume"}, small...), c.args...)
		out, stderr, err := proctest.Run(gorun, ddp, 0, args...)
		if err == nil || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: %v, want an error saying %q:\n%s%s", c.name, err, c.want, out, stderr)
		}
	}
	out := job(t, gorun, ddp, 0, append(append([]string{"--steps", "3", "--ckpt", dir, "--resume"}, small...), "--seed", "2", "--lr", "0.2")...)
	want := "note: the checkpoint in " + dir + " was saved by a run with --seed 1 --lr 0.1; this one goes on with --seed 2 --lr 0.2\n"
	if !strings.HasPrefix(out, want) || !strings.Contains(out, "step 3 loss") {
		t.Errorf("--seed 2 --lr 0.2 printed:\n%s\nwant first %q, then step 3", out, want)
	}
}

// TestBadCheckpointDir: a --ckpt that cannot hold the checkpoint (a
// regular file, or a path under one) fails at start-up, before any step,
// with a line naming --ckpt and the path.
func TestBadCheckpointDir(t *testing.T) {
	gorun, ddp := build(t)
	file := filepath.Join(t.TempDir(), "afile")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{file, filepath.Join(file, "ck")} {
		out, stderr, err := proctest.Run(gorun, ddp, 2, append([]string{"--steps", "3", "--ckpt", dir}, small...)...)
		if want := "ddp: --ckpt " + dir + ": "; err == nil || !strings.Contains(stderr, want) || strings.Contains(out, "step 1 ") {
			t.Errorf("--ckpt %s: %v, want a failure before step 1 saying %q:\n%s%s", dir, err, want, out, stderr)
		}
	}
}

// TestLocal: --local trains with no all-reduce, so it prints no all-reduce
// line (it used to say "too few steps to measure" at any number of steps).
func TestLocal(t *testing.T) {
	gorun, ddp := build(t)
	out := job(t, gorun, ddp, 2, append([]string{"--steps", "10", "--local"}, small...)...)
	if strings.Contains(out, "all-reduce") || !strings.Contains(out, "step 10 loss") {
		t.Errorf("--local at np 2, 10 steps: want 10 steps and no all-reduce line:\n%s", out)
	}
}

// TestFlagsDiffer: an MPMD job whose ranks run with different flags fails
// at start on every rank, naming the flag and the ranks.
func TestFlagsDiffer(t *testing.T) {
	gorun, ddp := build(t)
	args := append(append(append([]string{"--timeout", "1m", "-np", "1", ddp, "--bucket-mb", "1"}, small...), ":", "-np", "1", ddp), small...)
	cmd := exec.Command(gorun, args...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.CombinedOutput()
	want := "ddp: rank 1 runs with --bucket-mb=25 but rank 0 with --bucket-mb=1: give every rank of the job the same flags"
	// Said once, by rank 0, which gorun names; it was said by every rank.
	if code := cmd.ProcessState.ExitCode(); err == nil || code != 1 || strings.Count(string(out), want) != 1 || !strings.Contains(string(out), "gorun: rank 0 ") {
		t.Errorf("gorun %q: want status 1 and %q once, from rank 0, got %d:\n%s", args, want, code, out)
	}
}

// TestResumeOtherData: resuming with another --examples (another
// synthetic set) goes on after a note naming it, as another seed does.
func TestResumeOtherData(t *testing.T) {
	gorun, ddp := build(t)
	dir := t.TempDir()
	job(t, gorun, ddp, 0, append([]string{"--steps", "2", "--ckpt", dir}, small...)...)
	out := job(t, gorun, ddp, 0, append(append([]string{"--steps", "3", "--ckpt", dir, "--resume"}, small...), "--examples", "960")...)
	want := "note: the checkpoint in " + dir + " was saved by a run with --examples 480; this one goes on with --examples 960\n"
	if !strings.HasPrefix(out, want) || !strings.Contains(out, "step 3 loss") {
		t.Errorf("--examples 960 printed:\n%s\nwant first %q, then step 3", out, want)
	}
}

// TestFailureSaidOnce: a resume that rank 0 alone refuses is said once, by
// rank 0, which gorun names; the other ranks stop with its reason
// (workload.RootSays) and quietly, not with lines of a lost peer.
func TestFailureSaidOnce(t *testing.T) {
	gorun, ddp := build(t)
	dir := t.TempDir()
	job(t, gorun, ddp, 2, append([]string{"--steps", "1", "--ckpt", dir}, small...)...)
	for _, tc := range []struct{ name, dir, want string }{
		{"another --hidden", dir, "checkpoint does not match"},
		{"no checkpoint", filepath.Join(dir, "none"), "--resume: no checkpoint at "},
	} {
		out, stderr, err := proctest.Run(gorun, ddp, 3, append(append([]string{"--steps", "2", "--ckpt", tc.dir, "--resume"}, small...), "--hidden", "7")...)
		if err == nil || strings.Count(stderr, tc.want) != 1 || strings.Contains(stderr, "peer lost") || !strings.Contains(stderr, "gorun: rank 0 ") {
			t.Errorf("a resume with %s: %v; want one line saying %q, gorun naming rank 0 and no peer lost:\n%s%s", tc.name, err, tc.want, out, stderr)
		}
		if _, err := os.Stat(tc.dir); err == nil && tc.dir != dir {
			t.Errorf("a resume with %s: the failed resume created %s", tc.name, tc.dir)
		}
	}
}
