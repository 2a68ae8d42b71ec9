package zero

import (
	"context"
	"crypto/sha256"
	"encoding"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/strategies/nn/safetensors"
)

// A save of a driver whose Config.Compress keeps state (topk, powersgd,
// ...) also carries every rank's codec state: rank 0 gathers them and
// writes "compress.<tag>.safetensors", a uint8 tensor "compress.rank<R>"
// per rank, before it commits the index, whose metadata names the file
// and its sha256 ("compress.file", "compress.sha256") with the codec
// ("compress"), the ranks ("compress.ranks") and what the codec reduced
// under each key ("compress.layout", CodecLayout). The file has the
// save's tag, so the index names the states of its own save only: a
// crash before the commit leaves the previous checkpoint and its states.
// Load restores each rank's own state from the file, on every rank.

// The index's metadata keys of the codec state.
const (
	MetaCodec       = "compress"
	MetaCodecRanks  = "compress.ranks"
	MetaCodecLayout = "compress.layout"
	metaCodecFile   = "compress.file"
	metaCodecSum    = "compress.sha256"
)

// ErrCodecState is wrapped by Load's errors for a checkpoint whose codec
// state this driver cannot take: another codec, another number of ranks
// or another layout of the reductions.
var ErrCodecState = errors.New("the checkpoint's codec state does not fit the driver")

// codecFilePrefix begins the name of a save's codec state file.
const codecFilePrefix = "compress."

// CodecLayout describes what the driver's codec reduces under each key
// (the unit's index): the element counts of the units' reductions, which
// the ranks, the stage and hybrid sharding decide. A codec state restores
// only into a driver of the same layout.
func (z *Zero) CodecLayout() string {
	s := make([]string, len(z.units))
	for i, u := range z.units {
		n := u.Len()
		if z.n > 1 && z.rep != nil {
			n = u.chunkLen() // hybrid: the chunk's all-reduce across hosts
		}
		s[i] = strconv.Itoa(n)
	}
	return strings.Join(s, ",")
}

// saveCodec gathers the ranks' codec states and, on rank 0, writes them
// for the save tagged tag and adds their keys to md. Every rank calls it;
// without a stateful codec, or with one that has no work (CodecActive:
// its state is a fresh codec's), it does nothing.
func (z *Zero) saveCodec(ctx context.Context, dir, tag string, md map[string]string) error {
	if !z.CodecActive() {
		return nil
	}
	states, err := compress.GatherStates(ctx, z.comm, z.cfg.Compress, 0)
	if err != nil || states == nil {
		return err
	}
	ts := make([]safetensors.Tensor, len(states))
	for r, s := range states {
		ts[r] = safetensors.Tensor{Name: codecBlob(r), DType: safetensors.Uint8, Shape: []int{len(s)}, Data: s}
	}
	name := codecFilePrefix + tag + ".safetensors"
	path := filepath.Join(dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	meta := map[string]string{"tag": tag, MetaCodec: compress.StateName(z.cfg.Compress), MetaCodecRanks: strconv.Itoa(len(states))}
	if err := safetensors.WriteFile(path, ts, meta); err != nil {
		return err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	sum := sha256.Sum256(data)
	md[MetaCodec] = meta[MetaCodec]
	md[MetaCodecRanks] = meta[MetaCodecRanks]
	md[MetaCodecLayout] = z.CodecLayout()
	md[metaCodecFile] = name
	md[metaCodecSum] = hex.EncodeToString(sum[:])
	return nil
}

// codecBlob is rank r's tensor in a codec state file.
func codecBlob(r int) string { return "compress.rank" + strconv.Itoa(r) }

// cleanCodec removes from dir the codec state files, and their temporary
// files, of saves other than keep's (none: "").
func cleanCodec(dir, keep string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range ents {
		name := e.Name()
		stale := strings.HasPrefix(name, codecFilePrefix) && strings.HasSuffix(name, ".safetensors") && name != keep ||
			strings.HasPrefix(name, "."+codecFilePrefix) && strings.Contains(name, ".tmp-")
		if stale && !e.IsDir() {
			if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// loadCodec restores this rank's codec state from the checkpoint whose
// index metadata is meta, if it has one and the driver's codec keeps
// state and has work (CodecActive: an idle codec's state does not
// matter, and is dropped); it checks the codec, the ranks and the layout
// first.
func (z *Zero) loadCodec(dir string, meta map[string]string) error {
	name, has := meta[metaCodecFile]
	if !has || !compress.Stateful(z.cfg.Compress) || !z.CodecActive() {
		return nil
	}
	if saved, want := meta[MetaCodec], compress.StateName(z.cfg.Compress); saved != want {
		return fmt.Errorf("%w: it carries the codec state of %s, which this driver's codec %s cannot take", ErrCodecState, saved, want)
	}
	if saved, n := meta[MetaCodecRanks], z.comm.Size(); saved != strconv.Itoa(n) {
		return fmt.Errorf("%w: it carries the codec states of %s ranks, one each, which cannot be re-split for %d", ErrCodecState, saved, n)
	}
	if saved, now := meta[MetaCodecLayout], z.CodecLayout(); saved != now {
		return fmt.Errorf("%w: its codec reduced units of %s elements; this driver's reduces %s (another stage or hybrid sharding)", ErrCodecState, saved, now)
	}
	if filepath.Base(name) != name || !strings.HasPrefix(name, codecFilePrefix) {
		return fmt.Errorf("the index names codec state file %q, which is not one", name)
	}
	path := filepath.Join(dir, name)
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("reading the codec states: %w", err)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != meta[metaCodecSum] {
		return fmt.Errorf("%s: corrupt checkpoint file: sha256 %x, the index says %s", path, sum, meta[metaCodecSum])
	}
	f, err := safetensors.Decode(data)
	if err != nil {
		return fmt.Errorf("%s: corrupt checkpoint file: %w", path, err)
	}
	t, ok := f.Tensor(codecBlob(z.comm.Rank()))
	if !ok || t.DType != safetensors.Uint8 {
		return fmt.Errorf("%s: no uint8 tensor %s", path, codecBlob(z.comm.Rank()))
	}
	if err := z.cfg.Compress.(encoding.BinaryUnmarshaler).UnmarshalBinary(t.Data); err != nil {
		return fmt.Errorf("%s: rank %d's codec state: %w", path, z.comm.Rank(), err)
	}
	return nil
}
