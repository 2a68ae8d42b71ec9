package nn

import (
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/gorun-hpc/gorun/strategies/nn/safetensors"
)

// checkpointFormat names the layout of a checkpoint's tensors and
// metadata; Load refuses another.
const checkpointFormat = "gorun-checkpoint-1"

// ErrCheckpoint is wrapped by every error for a checkpoint that does not
// fit the model, the optimizer or the format.
var ErrCheckpoint = errors.New("checkpoint does not match")

// Checkpoint is what a training job saves to resume exactly: the
// parameters, the optimizer's state, the random streams, and the number
// of steps done. Meta carries the program's own strings (its flags, say).
type Checkpoint struct {
	Store     *Store
	Optimizer Optimizer // nil: parameters only
	Streams   map[string]*Stream
	Step      int
	Meta      map[string]string
	// Check, if set, is called by Load with the saved Meta before it reads
	// anything into the store: a program compares its own flags there and
	// says which to pass. Its error fails Load, after the file's name and
	// ErrCheckpoint ("checkpoint does not match: ").
	Check func(meta map[string]string) error
	// Blobs are the program's own byte strings (each rank's codec state,
	// say), saved as uint8 tensors under their names, which may be no
	// parameter's and may not begin with "optim.". Load sets Blobs to the
	// file's uint8 tensors (none, for a file saved without).
	Blobs map[string][]byte
	// Verified is set by Load: the file carried a sha256 of its content,
	// and it matched. A file saved before checkpoints carried one loads
	// with Verified false.
	Verified bool
}

// Save writes the checkpoint to path as a safetensors file, atomically: a
// crash leaves the previous file or the new one, never half of one. Each
// parameter is a tensor of its own name and shape; the optimizer's state
// is "optim.<state>.<parameter>" for each parameter it covers, so that
// Python's safetensors and Hugging Face tools read it as they read any
// state dict. The metadata holds a sha256 of the file's content (the
// tensors and the other metadata), which Load checks.
func (c *Checkpoint) Save(path string) error {
	var ts []safetensors.Tensor
	for _, p := range c.Store.Params {
		ts = append(ts, safetensors.F32(p.Name, p.Shape, p.W))
	}
	if c.Optimizer != nil {
		lo, hi := c.Optimizer.Range()
		for _, s := range c.Optimizer.State() {
			if s.I64 != nil {
				ts = append(ts, i64Tensor("optim."+s.Name, s.I64))
				continue
			}
			for _, p := range c.Store.Params {
				a, b := max(p.Offset, lo), min(p.End(), hi)
				if a >= b {
					continue
				}
				shape := p.Shape
				if a != p.Offset || b != p.End() {
					shape = []int{b - a} // a shard's part of a parameter
				}
				ts = append(ts, safetensors.F32("optim."+s.Name+"."+p.Name, shape, s.F32[a-lo:b-lo]))
			}
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Blobs)) {
		if c.Store.Param(name) != nil || strings.HasPrefix(name, "optim.") {
			return fmt.Errorf("checkpoint %s: blob %q has a parameter's or the optimizer's name", path, name)
		}
		b := c.Blobs[name]
		ts = append(ts, safetensors.Tensor{Name: name, DType: safetensors.Uint8, Shape: []int{len(b)}, Data: b})
	}
	meta := map[string]string{"format": checkpointFormat, "step": strconv.Itoa(c.Step)}
	if c.Optimizer != nil {
		meta["optimizer"] = optimizerName(c.Optimizer)
	}
	for k, v := range c.Meta {
		meta["user."+k] = v
	}
	for name, s := range c.Streams {
		b, err := s.MarshalBinary()
		if err != nil {
			return fmt.Errorf("checkpoint %s: stream %s: %w", path, name, err)
		}
		meta["rng."+name] = base64.StdEncoding.EncodeToString(b)
	}
	meta[sumKey] = contentSum(meta, ts)
	return safetensors.WriteFile(path, ts, meta)
}

// Load reads the checkpoint at path into c's store, optimizer and streams,
// which must be those of the model that saved it, and sets c.Step,
// c.Meta and c.Verified. Every error names the file: a file that is cut
// short, does not decode or fails its sha256 wraps ErrCorrupt, and one
// that does not fit c wraps ErrCheckpoint and says what did not match.
func (c *Checkpoint) Load(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err // an *os.PathError, which names path
	}
	f, err := safetensors.Decode(data)
	if err != nil {
		return fmt.Errorf("%s: %w: %w", path, ErrCorrupt, err)
	}
	verified := false
	if want, ok := f.Metadata[sumKey]; ok {
		if got := contentSum(f.Metadata, f.Tensors); got != want {
			return fmt.Errorf("%s: %w: sha256 %s of its tensors and metadata, its metadata says %s: the file changed after it was saved; resume from another copy, or train afresh",
				path, ErrCorrupt, got, want)
		}
		verified = true
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: %s", path, ErrCheckpoint, fmt.Sprintf(format, args...))
	}
	if f.Metadata["format"] != checkpointFormat {
		return bad("format %q, want %q: not a gorun checkpoint", f.Metadata["format"], checkpointFormat)
	}
	step, err := strconv.Atoi(f.Metadata["step"])
	if err != nil || step < 0 {
		return bad("step %q is not a step count", f.Metadata["step"])
	}
	meta := map[string]string{}
	for k, v := range f.Metadata {
		if len(k) > 5 && k[:5] == "user." {
			meta[k[5:]] = v
		}
	}
	if c.Check != nil {
		if err := c.Check(meta); err != nil {
			return fmt.Errorf("%s: %w: %w", path, ErrCheckpoint, err)
		}
	}
	if c.Optimizer != nil {
		saved, ok := f.Metadata["optimizer"]
		if name := optimizerName(c.Optimizer); ok && saved != name {
			return bad("it was saved with optimizer %s, and this one is %s", saved, name)
		}
	}
	for _, p := range c.Store.Params {
		if _, ok := f.Tensor(p.Name); !ok {
			return bad("no tensor %s: it holds another model (%s)", p.Name, tensorList(f))
		}
		if err := loadF32(f, p.Name, p.W); err != nil {
			return bad("%v", err)
		}
	}
	if c.Optimizer != nil {
		if err := c.loadOptimizer(f); err != nil {
			return bad("%v", err)
		}
	}
	for name, s := range c.Streams {
		b, err := base64.StdEncoding.DecodeString(f.Metadata["rng."+name])
		if err == nil {
			err = s.UnmarshalBinary(b)
		}
		if err != nil {
			return bad("random stream %s: %v", name, err)
		}
	}
	blobs := map[string][]byte{}
	for _, t := range f.Tensors {
		if t.DType == safetensors.Uint8 {
			blobs[t.Name] = t.Data
		}
	}
	c.Step, c.Meta, c.Blobs, c.Verified = step, meta, blobs, verified
	return nil
}

// optimizerName is what a checkpoint calls o: "sgd", "adamw", or its Go
// type for another.
func optimizerName(o Optimizer) string {
	switch o.(type) {
	case *SGD:
		return "sgd"
	case *AdamW:
		return "adamw"
	}
	return fmt.Sprintf("%T", o)
}

// tensorList names a file's first parameters (not the optimizer's state),
// to say what a checkpoint holds: "tensors wte.weight, wpe.weight, ...".
func tensorList(f *safetensors.File) string {
	var names []string
	more := false
	for _, t := range f.Tensors {
		if strings.HasPrefix(t.Name, "optim.") || t.DType == safetensors.Uint8 {
			continue
		}
		if len(names) == 3 {
			more = true
			break
		}
		names = append(names, t.Name)
	}
	if len(names) == 0 {
		return "no parameters"
	}
	list := "tensors " + strings.Join(names, ", ")
	if more {
		list += ", ..."
	}
	return list
}

func (c *Checkpoint) loadOptimizer(f *safetensors.File) error {
	lo, hi := c.Optimizer.Range()
	for _, s := range c.Optimizer.State() {
		if s.I64 != nil {
			t, ok := f.Tensor("optim." + s.Name)
			if !ok || t.DType != safetensors.Int64 || len(t.Data) != 8*len(s.I64) {
				return fmt.Errorf("optimizer state optim.%s: missing, or not %d int64s", s.Name, len(s.I64))
			}
			for i := range s.I64 {
				s.I64[i] = int64(binary.LittleEndian.Uint64(t.Data[8*i:]))
			}
			continue
		}
		for _, p := range c.Store.Params {
			a, b := max(p.Offset, lo), min(p.End(), hi)
			if a < b {
				name := "optim." + s.Name + "." + p.Name
				if _, ok := f.Tensor(name); !ok {
					return fmt.Errorf("no optimizer state %s: it was saved with another optimizer, or none", name)
				}
				if err := loadF32(f, name, s.F32[a-lo:b-lo]); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func loadF32(f *safetensors.File, name string, dst []float32) error {
	t, ok := f.Tensor(name)
	if !ok {
		return fmt.Errorf("no tensor %s", name)
	}
	if err := t.Float32sInto(dst); err != nil {
		return fmt.Errorf("tensor %s: %v (the model has %d elements)", name, err, len(dst))
	}
	return nil
}

func i64Tensor(name string, v []int64) safetensors.Tensor {
	data := make([]byte, 8*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint64(data[8*i:], uint64(x))
	}
	return safetensors.Tensor{Name: name, DType: safetensors.Int64, Shape: []int{len(v)}, Data: data}
}
