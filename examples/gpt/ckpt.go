package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/examples/internal/workload"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/hybrid"
	"github.com/gorun-hpc/gorun/strategies/nn"
	"github.com/gorun-hpc/gorun/strategies/nn/shardckpt"
)

// setting is one flag a checkpoint records, and its value in this run.
type setting struct {
	key, value string
}

// modelFlags shape the model; a checkpoint loads only into the same.
func modelFlags(model nn.GPTConfig) []setting {
	return []setting{{"layers", strconv.Itoa(model.Layers)}, {"heads", strconv.Itoa(model.Heads)},
		{"embd", strconv.Itoa(model.Dim)}, {"block", strconv.Itoa(model.Context)}, {"vocab", strconv.Itoa(model.Vocab)}}
}

// meshFlags lay out the state over the ranks; a checkpoint loads only on
// the same (m is the engine's mesh, with --dp resolved).
func meshFlags(c config, m *hybrid.Mesh) []setting {
	return []setting{{"tp", strconv.Itoa(m.TP)}, {"pp", strconv.Itoa(m.PP)}, {"dp", strconv.Itoa(m.DP)},
		{"zero", strconv.Itoa(c.zero)}, {"virtual", strconv.Itoa(c.virtual)}}
}

// runFlags may change on resuming, though the run then trains otherwise
// than the saved one would have.
func runFlags(c config) []setting {
	return []setting{{"seed", strconv.FormatUint(c.seed, 10)}, {"batch", strconv.Itoa(c.batch)},
		{"lr", strconv.FormatFloat(c.lr, 'g', -1, 64)}, {"dropout", strconv.FormatFloat(c.dropout, 'g', -1, 64)}}
}

// checkpointMeta is what a checkpoint records of this run's flags.
func checkpointMeta(c config, model nn.GPTConfig, m *hybrid.Mesh) map[string]string {
	meta := map[string]string{"model": "gpt", "optim": "adamw"}
	for _, s := range append(append(modelFlags(model), meshFlags(c, m)...), runFlags(c)...) {
		meta[s.key] = s.value
	}
	return meta
}

// checkSaved compares the flags a checkpoint recorded with this run's:
// another model or mesh is an error that says which flags to pass;
// another seed, batch, learning rate or dropout a notice line naming
// them and dir. A flag the checkpoint did not record is not compared.
// A checkpoint that carries codec state (hybrid.MetaCodec) needs the
// same --compress; one without it and a --compress that keeps state is
// a notice line.
func checkSaved(c config, model nn.GPTConfig, m *hybrid.Mesh, dir string, saved map[string]string) (notice string, err error) {
	if _, ok := saved[hybrid.MetaLayout]; !ok {
		return "", fmt.Errorf("it was not saved by examples/gpt (its index has no %q; examples/zero writes such sharded checkpoints): resume it with the program that saved it, or pass another --ckpt", hybrid.MetaLayout)
	}
	var pass, was, now []string
	for _, s := range append(modelFlags(model), meshFlags(c, m)...) {
		if v, ok := saved[s.key]; ok && v != s.value {
			pass = append(pass, "--"+s.key+" "+v)
			was, now = append(was, s.key+" "+v), append(now, s.key+" "+s.value)
		}
	}
	if len(pass) > 0 {
		np := ""
		if n, ok := savedRanks(saved); ok && n != m.TP*m.PP*m.DP {
			np = fmt.Sprintf(" on %s (gorun -np %d)", ranks(n), n)
		}
		return "", fmt.Errorf("it was saved with %s; this run has %s: pass %s%s, or another --ckpt. A checkpoint loads only on the mesh and model it was saved on: resharding it for another --tp, --pp, --dp, --zero or --virtual is not supported (Megatron too needs a conversion tool for it)",
			strings.Join(was, ", "), strings.Join(now, ", "), strings.Join(pass, " "), np)
	}
	if o, ok := saved["optim"]; ok && o != "adamw" {
		return "", fmt.Errorf("it was saved with the optimizer %s; gpt trains with adamw: pass another --ckpt", o)
	}
	codec, _ := compress.Parse(c.compress, c.seed) // checked with the flags
	var notes []string
	switch kept, has := saved[hybrid.MetaCodec]; {
	case m.DP == 1: // no codec runs with one replica (hybrid.Engine.CodecActive): its state does not matter
	case has && (!compress.Stateful(codec) || kept != compress.StateName(codec)):
		return "", fmt.Errorf("it carries each rank's error-feedback state of --compress %s; this run has --compress %s: pass --compress %s (its lossless stage may differ), or another --ckpt", kept, c.compress, kept)
	case !has && compress.Stateful(codec):
		notes = append(notes, fmt.Sprintf("note: the checkpoint in %s carries no codec state (it was saved without --compress %s): its error-feedback state starts at zero", dir, compress.StateName(codec)))
	}
	was, now = nil, nil
	for _, s := range runFlags(c) {
		if v, ok := saved[s.key]; ok && v != s.value {
			was, now = append(was, "--"+s.key+" "+v), append(now, "--"+s.key+" "+s.value)
		}
	}
	if len(was) > 0 {
		notes = append(notes, fmt.Sprintf("note: the checkpoint in %s was saved by a run with %s; this one goes on with %s",
			dir, strings.Join(was, " "), strings.Join(now, " ")))
	}
	return strings.Join(notes, "\n"), nil
}

// savedRanks is the number of ranks a checkpoint's mesh has.
func savedRanks(saved map[string]string) (int, bool) {
	n := 1
	for _, k := range []string{"tp", "pp", "dp"} {
		v, err := strconv.Atoi(saved[k])
		if err != nil {
			return 0, false
		}
		n *= v
	}
	return n, true
}

// resume loads --ckpt's checkpoint into e and returns its step, after
// comparing the flags its index records with this run's. Under gorun
// --max-restarts a directory with no checkpoint yet means a first start;
// one with examples/ddp's checkpoint is an error.
func resume(ctx context.Context, w *spmd.World, e *hybrid.Engine, c config, model nn.GPTConfig, out io.Writer) (int, error) {
	dir := c.ckpt
	path := filepath.Join(dir, shardckpt.IndexFile)
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		if err := workload.ForeignCheckpoint(dir, true); err != nil {
			return 0, err
		}
		if w.Env().MaxRestarts > 0 {
			if w.Rank() == 0 {
				fmt.Fprintf(out, "no checkpoint at %s yet: training from step 0\n", path)
			}
			return 0, nil
		}
		return 0, fmt.Errorf("--resume: no checkpoint at %s: train with --ckpt %s first", path, dir)
	}
	// A corrupt index is e.Load's to report, on every rank.
	if ix, err := shardckpt.Open(dir); err == nil {
		notice, err := checkSaved(c, model, e.Mesh(), dir, ix.Meta())
		if err != nil {
			return 0, fmt.Errorf("--resume: %s: %w: %w", path, nn.ErrCheckpoint, err)
		}
		if notice != "" && w.Rank() == 0 {
			fmt.Fprintln(out, notice)
		}
	}
	step, err := e.Load(ctx, dir)
	if err != nil {
		return 0, fmt.Errorf("--resume: %w", err)
	}
	if w.Rank() == 0 {
		fmt.Fprintf(out, "resuming from step %d of %s\n", step, dir)
	}
	return step, nil
}
