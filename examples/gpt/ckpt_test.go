package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/strategies/nn/shardckpt"
)

// ckptArgs is the model of the checkpoint tests: 2 layers, on a little
// of the Go source.
var ckptArgs = []string{"--layers", "2", "--max-bytes", "100000"}

// TestResume: 4 steps with --ckpt, then --steps 8 --resume, print the
// step 5-8 loss lines of 8 steps straight, on one rank and on meshes of
// tensor, pipeline and ZeRO-1 data parallelism, and data parallelism
// with topk's error feedback (its state saved), dropout on in four.
func TestResume(t *testing.T) {
	gorun, gpt := build(t)
	for _, tc := range []struct {
		np   int
		mesh []string
	}{
		{0, []string{"--dropout", "0.1"}},
		{2, []string{"--tp", "2", "--dropout", "0.1"}},
		{2, []string{"--pp", "2"}},
		{2, []string{"--dp", "2", "--zero", "1", "--dropout", "0.1"}},
		{2, []string{"--dp", "2", "--compress", "topk:0.1", "--dropout", "0.1"}},
	} {
		t.Run(strings.Join(tc.mesh, " "), func(t *testing.T) {
			dir := t.TempDir()
			args := append(slices.Clone(ckptArgs), tc.mesh...)
			run := func(extra ...string) string {
				t.Helper()
				out, stderr, err := job(gorun, gpt, tc.np, append(slices.Clone(args), extra...)...)
				if err != nil {
					t.Fatalf("%s: %v\n%s%s", strings.Join(extra, " "), err, out, stderr)
				}
				return out
			}
			want := losses(t, run("--steps", "8"))
			run("--steps", "4", "--ckpt", dir)
			out := run("--steps", "8", "--ckpt", dir, "--resume")
			got := losses(t, out)
			if len(want) != 8 || !slices.Equal(got, want[4:]) || !strings.Contains(out, "resuming from step 4 of "+dir) {
				t.Errorf("resumed losses %v, straight %v:\n%s", got, want, out)
			}
			// The checkpoint is at step 8: --steps 5 from it trains nothing.
			out = run("--steps", "5", "--ckpt", dir, "--resume")
			if !strings.Contains(out, "is at step 8, at or past --steps 5: nothing to train") || strings.Contains(out, "loss") {
				t.Errorf("--resume --steps 5 from step 8 printed:\n%s", out)
			}
		})
	}
}

// TestResumeRefused: a checkpoint does not load on another mesh or
// model, and the error says what to pass; a damaged or missing one is
// an error naming its file, but under gorun --max-restarts a missing one
// is a first start.
func TestResumeRefused(t *testing.T) {
	gorun, gpt := build(t)
	dir := t.TempDir()
	if out, stderr, err := job(gorun, gpt, 2, append(slices.Clone(ckptArgs), "--tp", "2", "--steps", "1", "--ckpt", dir)...); err != nil {
		t.Fatalf("%v\n%s%s", err, out, stderr)
	}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"--dp", "2"}, []string{"it was saved with tp 2, dp 1; this run has tp 1, dp 2: pass --tp 2 --dp 1, or another --ckpt", "resharding it for another --tp, --pp, --dp, --zero or --virtual is not supported"}},
		{[]string{"--tp", "2", "--embd", "64"}, []string{"it was saved with embd 128; this run has embd 64: pass --embd 128"}},
		{[]string{"--tp", "2", "--zero", "1"}, []string{"it was saved with zero 0; this run has zero 1: pass --zero 0"}},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, stderr, err := job(gorun, gpt, 2, append(slices.Clone(ckptArgs), append(tc.args, "--steps", "2", "--ckpt", dir, "--resume")...)...)
			for _, w := range tc.want {
				if err == nil || !strings.Contains(stderr, w) {
					t.Errorf("err %v, stderr lacks %q:\n%s%s", err, w, out, stderr)
				}
			}
		})
	}
	t.Run("damaged", func(t *testing.T) {
		shards, _ := filepath.Glob(filepath.Join(dir, "shard-*"))
		if len(shards) != 2 {
			t.Fatalf("shards %v, want 2", shards)
		}
		b, err := os.ReadFile(shards[1])
		if err != nil {
			t.Fatal(err)
		}
		b[len(b)-10] ^= 1
		if err := os.WriteFile(shards[1], b, 0o644); err != nil {
			t.Fatal(err)
		}
		out, stderr, err := job(gorun, gpt, 2, append(slices.Clone(ckptArgs), "--tp", "2", "--steps", "2", "--ckpt", dir, "--resume")...)
		if want := shards[1] + ": corrupt checkpoint file: sha256 "; err == nil || !strings.Contains(stderr, want) {
			t.Errorf("err %v, stderr lacks %q:\n%s%s", err, want, out, stderr)
		}
	})
	t.Run("missing", func(t *testing.T) {
		empty := t.TempDir()
		out, stderr, err := job(gorun, gpt, 0, append(slices.Clone(ckptArgs), "--steps", "1", "--ckpt", empty, "--resume")...)
		want := "--resume: no checkpoint at " + filepath.Join(empty, shardckpt.IndexFile) + ": train with --ckpt " + empty + " first"
		if err == nil || !strings.Contains(stderr, want) {
			t.Errorf("err %v, stderr lacks %q:\n%s%s", err, want, out, stderr)
		}
		b, err := exec.Command(gorun, append([]string{"--max-restarts", "1", "-np", "1", "--timeout", "2m", gpt}, append(slices.Clone(ckptArgs), "--steps", "1", "--ckpt", empty, "--resume")...)...).CombinedOutput()
		if err != nil || !strings.Contains(string(b), "yet: training from step 0") || !strings.Contains(string(b), "step 1 loss ") {
			t.Errorf("--resume on a first start under --max-restarts: %v\n%s", err, b)
		}
	})
}

// TestResumeCodec: a checkpoint saved with --compress topk:0.1 does not
// resume with another --compress, or none, and says what to pass; one
// saved without a codec resumes with topk after a note.
func TestResumeCodec(t *testing.T) {
	gorun, gpt := build(t)
	dir, plain := t.TempDir(), t.TempDir()
	base := append(slices.Clone(ckptArgs), "--dp", "2")
	for _, save := range []struct {
		dir   string
		extra []string
	}{{dir, []string{"--compress", "topk:0.1"}}, {plain, nil}} {
		if out, stderr, err := job(gorun, gpt, 2, append(append(slices.Clone(base), save.extra...), "--steps", "1", "--ckpt", save.dir)...); err != nil {
			t.Fatalf("%v\n%s%s", err, out, stderr)
		}
	}
	for _, other := range []string{"powersgd", "none"} {
		out, stderr, err := job(gorun, gpt, 2, append(slices.Clone(base), "--compress", other, "--steps", "2", "--ckpt", dir, "--resume")...)
		want := "it carries each rank's error-feedback state of --compress topk:0.1; this run has --compress " + other + ": pass --compress topk:0.1"
		if err == nil || !strings.Contains(stderr, want) {
			t.Errorf("--compress %s: err %v, stderr lacks %q:\n%s%s", other, err, want, out, stderr)
		}
	}
	out, stderr, err := job(gorun, gpt, 2, append(slices.Clone(base), "--compress", "topk:0.1", "--steps", "2", "--ckpt", plain, "--resume")...)
	want := "note: the checkpoint in " + plain + " carries no codec state (it was saved without --compress topk:0.1): its error-feedback state starts at zero"
	if err != nil || !strings.Contains(out, want) || !strings.Contains(out, "step 2 loss ") {
		t.Errorf("err %v, output lacks %q or step 2:\n%s%s", err, want, out, stderr)
	}
}
