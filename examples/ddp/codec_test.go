package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/spmdtest/proctest"
	"github.com/gorun-hpc/gorun/strategies/nn/safetensors"
)

// TestCompressedResume: with a stateful codec, 10 steps, a checkpoint,
// then 10 more from it, on 2 ranks, print the losses of 20 uninterrupted
// steps digit for digit and end with the same checkpoint, byte for byte,
// as TestResume shows without compression: the checkpoint carries each
// rank's codec state. The same checkpoint stripped of its codec state
// resumes with a note and trains otherwise, so the test sees the state.
func TestCompressedResume(t *testing.T) {
	gorun, ddp := build(t)
	for _, codec := range []string{"topk:0.1", "powersgd:2"} {
		whole, split := t.TempDir(), t.TempDir()
		args := append([]string{"--compress", codec}, small...)
		want := losses(t, job(t, gorun, ddp, 2, append(args, "--steps", "20", "--ckpt", whole)...))
		job(t, gorun, ddp, 2, append(args, "--steps", "10", "--ckpt", split)...)
		half, _ := os.ReadFile(filepath.Join(split, ckptFile))
		out := job(t, gorun, ddp, 2, append(args, "--steps", "20", "--ckpt", split, "--resume")...)
		got := losses(t, out)
		if _, ok := got[10]; ok || strings.Contains(out, "codec state") {
			t.Errorf("%s: the resumed run ran step 10 again, or printed a note on the codec state:\n%s", codec, out)
		}
		for s := 11; s <= 20; s++ {
			if got[s] != want[s] {
				t.Errorf("%s resumed: step %d loss %.6f, uninterrupted %.6f", codec, s, got[s], want[s])
			}
		}
		a, _ := os.ReadFile(filepath.Join(whole, ckptFile))
		b, _ := os.ReadFile(filepath.Join(split, ckptFile))
		if len(a) == 0 || !bytes.Equal(a, b) {
			t.Errorf("%s: the resumed run's checkpoint (%d bytes) differs from the uninterrupted run's (%d bytes)", codec, len(b), len(a))
		}

		stripCodecState(t, filepath.Join(split, ckptFile), half)
		out = job(t, gorun, ddp, 2, append(args, "--steps", "20", "--ckpt", split, "--resume")...)
		note := "note: the checkpoint in " + split + " has no codec state (saved without --compress " + codec + ", or before checkpoints carried it): the residuals start from zero\n"
		if strings.Count(out, "codec state") != 1 || !strings.Contains(out, note) {
			t.Errorf("%s: resumed from a checkpoint without codec state, want one line %q:\n%s", codec, note, out)
		}
		lost, differ := losses(t, out), false
		for s := 11; s <= 20; s++ {
			differ = differ || lost[s] != want[s]
		}
		if !differ {
			t.Errorf("%s: resumed without the codec state, the run still prints the uninterrupted losses: the test cannot see the state", codec)
		}
	}
}

// stripCodecState writes data, a checkpoint, to path as a checkpoint
// saved before they carried codec state: without its uint8 tensors, the
// keys that describe them and its sha256 (which it would not match).
func stripCodecState(t *testing.T, path string, data []byte) {
	t.Helper()
	f, err := safetensors.Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	var ts []safetensors.Tensor
	for _, x := range f.Tensors {
		if x.DType != safetensors.Uint8 {
			ts = append(ts, x)
		}
	}
	md := f.Metadata
	for _, k := range []string{"sha256", "user.compress", "user.compress.ranks", "user.compress.buckets", "user.bucket-mb"} {
		delete(md, k)
	}
	if len(ts) == len(f.Tensors) {
		t.Fatalf("%s has no codec state to strip", path)
	}
	if err := safetensors.WriteFile(path, ts, md); err != nil {
		t.Fatal(err)
	}
}

// TestCodecStateRefused: a checkpoint with topk's codec state on 2 ranks
// is refused, saying what differs and what to pass, by a run with
// another codec, on 3 ranks, or with other buckets; a run without
// --compress goes on after a note.
func TestCodecStateRefused(t *testing.T) {
	gorun, ddp := build(t)
	dir := t.TempDir()
	job(t, gorun, ddp, 2, append([]string{"--steps", "2", "--ckpt", dir, "--compress", "topk:0.1"}, small...)...)
	path := filepath.Join(dir, ckptFile)
	cases := []struct {
		name string
		np   int
		args []string
		want string
	}{
		{"other codec", 2, []string{"--compress", "powersgd:2"},
			path + ": checkpoint does not match: it carries the codec state of --compress topk:0.1, which this run's --compress powersgd:2 cannot take: pass --compress topk:0.1"},
		{"other ranks", 3, []string{"--compress", "topk:0.1"},
			path + ": checkpoint does not match: it carries the codec states of 2 ranks, one each, which cannot be re-split for 3: run it on 2 ranks (gorun -np 2)"},
		{"other buckets", 2, []string{"--compress", "topk:0.1", "--bucket-mb", "0.001"},
			path + ": checkpoint does not match: its codec state is keyed by 1 buckets that --bucket-mb 25 cut; this run's --bucket-mb 0.001 cuts "},
	}
	for _, c := range cases {
		args := append(append([]string{"--steps", "4", "--ckpt", dir, "--resume"}, small...), c.args...)
		out, stderr, err := proctest.Run(gorun, ddp, c.np, args...)
		if err == nil || !strings.Contains(stderr, c.want) {
			t.Errorf("%s: %v, want an error saying %q:\n%s%s", c.name, err, c.want, out, stderr)
		}
	}
	out := job(t, gorun, ddp, 2, append([]string{"--steps", "3", "--ckpt", dir, "--resume"}, small...)...)
	want := "note: the checkpoint in " + dir + " carries the codec state of --compress topk:0.1, which this run (--compress none) does not use\n"
	if !strings.Contains(out, want) || !strings.Contains(out, "step 3 loss") {
		t.Errorf("resumed without --compress:\n%s\nwant %q, then step 3", out, want)
	}
}

// TestCompressedRestart: under gorun --max-restarts, a compressed job
// whose rank 1 dies at step 13 restarts from its step-10 checkpoint,
// codec state included, and prints the uninterrupted job's losses.
func TestCompressedRestart(t *testing.T) {
	gorun, ddp := build(t)
	args := append([]string{"--steps", "20", "--ckpt-every", "5", "--compress", "topk:0.1"}, small...)
	want := losses(t, job(t, gorun, ddp, 2, append(args, "--ckpt", t.TempDir())...))
	cmd := exec.Command(gorun, append([]string{"-np", "2", "--max-restarts", "1", "--timeout", "2m", ddp, "--ckpt", t.TempDir(), "--resume", "--crash-at", "13"}, args...)...)
	cmd.WaitDelay = 10 * time.Second
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "restart 1: resuming from step 10\n") {
		t.Fatalf("gorun: %v, want a restart from step 10:\n%s", err, out)
	}
	got := losses(t, string(out))
	for s := 11; s <= 20; s++ {
		if got[s] != want[s] {
			t.Errorf("restarted: step %d loss %.6f, uninterrupted %.6f", s, got[s], want[s])
		}
	}
}

// TestCompressOneRank: on one rank --compress has nothing to do: the run
// trains exactly as without it, says so instead of claiming bytes sent,
// and resumes a checkpoint that carries 2 ranks' codec state with a note
// that it drops it, where it would refuse to re-split state it used.
func TestCompressOneRank(t *testing.T) {
	gorun, ddp := build(t)
	args := append([]string{"--steps", "6"}, small...)
	want := losses(t, job(t, gorun, ddp, 1, args...))
	out := job(t, gorun, ddp, 1, append(args, "--compress", "topk:0.01")...)
	sameLosses(t, "np 1 --compress topk:0.01", losses(t, out), want, 1, 6)
	line := "compression topk:0.01 had nothing to do (one data-parallel replica, no gradients to exchange): the gradients stayed exact\n"
	if !strings.Contains(out, line) || strings.Contains(out, " sent ") {
		t.Errorf("np 1 --compress topk:0.01: want the line %q and no bytes sent:\n%s", line, out)
	}
	dir := t.TempDir()
	job(t, gorun, ddp, 2, append(args, "--compress", "topk:0.01", "--ckpt", dir)...)
	out = job(t, gorun, ddp, 1, append(small, "--steps", "8", "--compress", "topk:0.01", "--ckpt", dir, "--resume")...)
	note := "note: the checkpoint in " + dir + " carries the codec state of --compress topk:0.01, which this run (--compress topk:0.01) does not use (it has nothing to do: one data-parallel replica, no gradients to exchange)\n"
	if !strings.Contains(out, note) || !strings.Contains(out, "step 8 loss") {
		t.Errorf("np 1 resuming 2 ranks' codec state: want %q, then step 8:\n%s", note, out)
	}
}
