package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/strategies/nn/shardckpt"
)

// TestCompressedResume: at stage 3 with a stateful codec, 10 steps, a
// checkpoint, then 10 more from it, on 2 ranks, print the losses of 20
// uninterrupted steps digit for digit: the checkpoint carries each rank's
// codec state. The same checkpoint with its index stripped of the codec
// state resumes with a note and trains otherwise; on 3 ranks it is
// refused, and without --compress it goes on after a note.
func TestCompressedResume(t *testing.T) {
	gorun, zero := build(t)
	for _, codec := range []string{"topk:0.1", "powersgd:2"} {
		args := append([]string{"--zero", "3", "--compress", codec}, small...)
		want := losses(mustJob(t, gorun, zero, 2, append(args, "--steps", "20")...))
		dir := t.TempDir()
		mustJob(t, gorun, zero, 2, append(args, "--steps", "10", "--ckpt", dir)...)
		other, stderr, err := job(gorun, zero, 3, append(args, "--steps", "20", "--ckpt", dir, "--resume")...)
		if w := "it carries the codec states of 2 ranks, one each, which cannot be re-split for 3: run it on 2 ranks (gorun -np 2)"; err == nil || !strings.Contains(stderr, w) {
			t.Errorf("%s on 3 ranks: %v, want an error saying %q:\n%s%s", codec, err, w, other, stderr)
		}
		out := mustJob(t, gorun, zero, 2, append(args, "--steps", "20", "--ckpt", dir, "--resume")...)
		got := losses(out)
		if _, ok := got[10]; ok || strings.Contains(out, "codec state") {
			t.Errorf("%s: the resumed run ran step 10 again, or printed a note on the codec state:\n%s", codec, out)
		}
		for s := 11; s <= 20; s++ {
			if got[s] != want[s] {
				t.Errorf("%s resumed: step %d loss %.6f, uninterrupted %.6f", codec, s, got[s], want[s])
			}
		}
		out = mustJob(t, gorun, zero, 2, append([]string{"--zero", "3", "--steps", "21", "--ckpt", dir, "--resume"}, small...)...)
		if note := "note: the checkpoint in " + dir + " carries the codec state of --compress " + codec + ", which this run (--compress none) does not use\n"; !strings.Contains(out, note) || !strings.Contains(out, "step 21 loss") {
			t.Errorf("%s resumed without --compress:\n%s\nwant %q, then step 21", codec, out, note)
		}

		dir = t.TempDir()
		mustJob(t, gorun, zero, 2, append(args, "--steps", "10", "--ckpt", dir)...)
		stripCodecState(t, dir)
		out = mustJob(t, gorun, zero, 2, append(args, "--steps", "20", "--ckpt", dir, "--resume")...)
		note := "note: the checkpoint in " + dir + " has no codec state (saved without --compress " + codec + ", or before checkpoints carried it): the residuals start from zero\n"
		if strings.Count(out, "codec state") != 1 || !strings.Contains(out, note) {
			t.Errorf("%s: resumed from a checkpoint without codec state, want one line %q:\n%s", codec, note, out)
		}
		lost, differ := losses(out), false
		for s := 11; s <= 20; s++ {
			differ = differ || lost[s] != want[s]
		}
		if !differ {
			t.Errorf("%s: resumed without the codec state, the run still prints the uninterrupted losses: the test cannot see the state", codec)
		}
	}
}

// stripCodecState makes dir's checkpoint one saved before checkpoints
// carried codec state: its index without the codec keys.
func stripCodecState(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, shardckpt.IndexFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ix map[string]any
	if err := json.Unmarshal(data, &ix); err != nil {
		t.Fatal(err)
	}
	md := ix["metadata"].(map[string]any)
	if _, ok := md["compress.file"]; !ok {
		t.Fatalf("%s names no codec state", path)
	}
	for k := range md {
		if strings.HasPrefix(k, "compress") {
			delete(md, k)
		}
	}
	if data, err = json.Marshal(ix); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestCompressIdle: where --compress has nothing to do, on one rank or
// with hybrid sharding on one host (whose reduce-scatter stays exact),
// the run trains exactly as without it and says so instead of claiming
// bytes sent.
func TestCompressIdle(t *testing.T) {
	gorun, zero := build(t)
	args := append([]string{"--steps", "4"}, small...)
	for _, tc := range []struct {
		np    int
		shard []string
		why   string
	}{
		{1, []string{"--zero", "3"}, "one data-parallel replica, no gradients to exchange"},
		{2, []string{"--shard", "hybrid"}, "hybrid sharding on one host, whose reduce-scatter stays exact"},
	} {
		a := append(append([]string{}, args...), tc.shard...)
		want := losses(mustJob(t, gorun, zero, tc.np, a...))
		out := mustJob(t, gorun, zero, tc.np, append(a, "--compress", "topk:0.01")...)
		got := losses(out)
		for s := 1; s <= 4; s++ {
			if got[s] != want[s] {
				t.Errorf("np %d %v: step %d loss %.6f with --compress topk:0.01, %.6f without", tc.np, tc.shard, s, got[s], want[s])
			}
		}
		line := "compression topk:0.01 had nothing to do (" + tc.why + "): the gradients stayed exact\n"
		if !strings.Contains(out, line) || strings.Contains(out, " sent ") {
			t.Errorf("np %d %v: want the line %q and no bytes sent:\n%s", tc.np, tc.shard, line, out)
		}
	}
}
