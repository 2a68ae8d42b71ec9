package workload

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gorun-hpc/gorun/strategies/nn/shardckpt"
)

// CheckpointFile is the single-file checkpoint's name inside examples/ddp's
// --ckpt directory; examples/zero's sharded one has shardckpt.IndexFile.
const CheckpointFile = "checkpoint.safetensors"

// setting is one flag a checkpoint records, and its value in this run.
type setting struct {
	key, value string
}

// shapeFlags are the flags that shape a model of kind model (mlp or gpt),
// with this run's values.
func (w *Workload) shapeFlags(model string) []setting {
	c := w.cfg
	if model == "mlp" {
		return []setting{{"hidden", w.hidden()}}
	}
	return []setting{{"layers", strconv.Itoa(c.Layers)}, {"heads", strconv.Itoa(c.Heads)},
		{"dim", strconv.Itoa(c.Dim)}, {"context", strconv.Itoa(c.Context)}}
}

// runFlags are the flags that a resumed run may change, though it then
// trains otherwise than the saved run would have: the seed (of the data
// order and dropout), the global batch, the learning rate (and SGD's
// momentum) and the data (dataFlags).
func (w *Workload) runFlags() []setting {
	c := w.cfg
	s := []setting{{"seed", strconv.FormatUint(c.Seed, 10)}, {"batch", strconv.Itoa(w.batch)},
		{"lr", strconv.FormatFloat(c.LR, 'g', -1, 64)}}
	if c.Optim == "sgd" {
		s = append(s, setting{"momentum", strconv.FormatFloat(c.Momentum, 'g', -1, 64)})
	}
	return append(s, w.dataFlags()...)
}

// dataFlags are the flags that choose the data: the synthetic set's
// --examples for the mlp; for the gpt --data ("" for the Go
// distribution's source) and --max-bytes, unless --data is a token file
// (.bin), which is read whole.
func (w *Workload) dataFlags() []setting {
	c := w.cfg
	if c.Model == "mlp" {
		return []setting{{"examples", strconv.Itoa(c.Examples)}}
	}
	s := []setting{{"data", c.Data}}
	if filepath.Ext(c.Data) != ".bin" {
		s = append(s, setting{"max-bytes", strconv.Itoa(c.MaxBytes)})
	}
	return s
}

// flagArg is a flag and its value as a command line takes them, an
// empty value as two single quotes.
func flagArg(key, value string) string {
	if value == "" {
		value = "''"
	}
	return "--" + key + " " + value
}

// hidden is --hidden as "32,24", however it was spelled; "" where it
// does not parse (a gpt run's).
func (w *Workload) hidden() string {
	sizes, err := w.cfg.hidden()
	if err != nil {
		return ""
	}
	s := make([]string, len(sizes))
	for i, n := range sizes {
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// shape describes the model: "784-32-24-10", or "2 layers, 2 heads, dim
// 32, context 16, vocab 65".
func (w *Workload) shape() string {
	if w.cfg.Model == "mlp" {
		return fmt.Sprintf("%d-%s-%d", mlpInputs, strings.ReplaceAll(w.hidden(), ",", "-"), mlpClasses)
	}
	c := w.cfg
	return fmt.Sprintf("%d layers, %d heads, dim %d, context %d, vocab %d", c.Layers, c.Heads, c.Dim, c.Context, w.vocab)
}

// CheckpointMeta is what a checkpoint of this run records of its flags,
// for CheckSaved to compare on resuming: the model, its shape, the
// optimizer, and the seed, global batch, learning rate and data.
func (w *Workload) CheckpointMeta() map[string]string {
	m := map[string]string{"model": w.cfg.Model, "shape": w.shape(), "optim": w.cfg.Optim}
	for _, s := range append(w.shapeFlags(w.cfg.Model), w.runFlags()...) {
		m[s.key] = s.value
	}
	return m
}

// CheckSaved compares the flags a checkpoint recorded (CheckpointMeta)
// with this run's. A model of another kind or shape, or another optimizer,
// is an error that says which flags to pass; another seed, batch,
// learning rate or data is a notice line naming them and dir, for the run
// goes on with its own. The errors do not name the checkpoint: its reader does. A
// flag the checkpoint did not record (one saved before they
// were) is not compared.
func (w *Workload) CheckSaved(dir string, saved map[string]string) (notice string, err error) {
	c := w.cfg
	var pass []string
	kind := c.Model
	if m, ok := saved["model"]; ok && m != c.Model {
		kind = m
		pass = append(pass, "--model "+m)
	}
	for _, s := range w.shapeFlags(kind) {
		if v, ok := saved[s.key]; ok && v != s.value {
			pass = append(pass, "--"+s.key+" "+v)
		}
	}
	if sh, ok := saved["shape"]; len(pass) > 0 || ok && sh != w.shape() {
		what := article(kind) + " " + kind + " model"
		if sh != "" {
			what += " (" + sh + ")"
		}
		advice := "pass " + strings.Join(pass, " ")
		if len(pass) == 0 { // the vocabulary differs: another text
			advice = "pass the --data it was trained on"
			for _, d := range w.dataFlags() {
				if v, ok := saved[d.key]; ok && v != d.value {
					pass = append(pass, flagArg(d.key, v))
				}
			}
			if len(pass) > 0 {
				advice = "pass " + strings.Join(pass, " ") + ", the data it was trained on"
			}
		}
		return "", fmt.Errorf("it holds %s; this run builds %s (%s): %s, or another --ckpt", what, c.Model, w.shape(), advice)
	}
	if o, ok := saved["optim"]; ok && o != c.Optim {
		return "", fmt.Errorf("it was saved with %s; this run uses %s: pass --optim %s, or another --ckpt", o, c.Optim, o)
	}
	var was, now []string
	for _, s := range w.runFlags() {
		if v, ok := saved[s.key]; ok && v != s.value {
			was, now = append(was, flagArg(s.key, v)), append(now, flagArg(s.key, s.value))
		}
	}
	if len(was) == 0 {
		return "", nil
	}
	return fmt.Sprintf("note: the checkpoint in %s was saved by a run with %s; this one goes on with %s",
		dir, strings.Join(was, " "), strings.Join(now, " ")), nil
}

// ForeignCheckpoint says, for a --ckpt directory without the checkpoint a
// program reads (sharded: examples/zero's index, or else examples/ddp's
// single file), whether it holds one of the other kind: an error that says
// which program resumes it, or nil.
func ForeignCheckpoint(dir string, sharded bool) error {
	if sharded {
		if exists(filepath.Join(dir, CheckpointFile)) {
			return fmt.Errorf("--resume: %s holds a ddp (single-file) checkpoint, %s, not a sharded one: resume it with examples/ddp, or pass another --ckpt",
				dir, CheckpointFile)
		}
		return nil
	}
	if exists(filepath.Join(dir, shardckpt.IndexFile)) {
		return fmt.Errorf("--resume: %s holds a sharded checkpoint (%s, of examples/zero), not a single-file one: resume it with examples/zero (--zero 0 trains as ddp does), or pass another --ckpt",
			dir, shardckpt.IndexFile)
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return !errors.Is(err, fs.ErrNotExist)
}

// article is "an" before mlp, "a" before gpt.
func article(kind string) string {
	if strings.HasPrefix(kind, "m") {
		return "an"
	}
	return "a"
}
