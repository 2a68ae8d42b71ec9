package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/gorun-hpc/gorun/compress"
	"github.com/gorun-hpc/gorun/examples/internal/workload"
	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
	"github.com/gorun-hpc/gorun/strategies/dp"
	"github.com/gorun-hpc/gorun/strategies/nn"
)

// A checkpoint of a run with a stateful codec (--compress topk, powersgd,
// ...) carries every rank's codec state, gathered to rank 0, as the
// uint8 tensors "compress.rank<R>" (nn.Checkpoint.Blobs), and records in
// its metadata the codec ("compress"), the number of ranks
// ("compress.ranks") and the buckets the states are keyed by
// ("compress.buckets", with the --bucket-mb that cut them). Resuming, rank
// 0 checks these against the run and hands each rank its own state back.

// The metadata keys of the codec state.
const (
	metaCodec    = "compress"
	metaRanks    = "compress.ranks"
	metaBuckets  = "compress.buckets"
	metaBucketMB = "bucket-mb"
)

// blobName is rank r's codec state's tensor in the checkpoint.
func blobName(r int) string { return "compress.rank" + strconv.Itoa(r) }

// codecMeta adds to meta (the workload's CheckpointMeta) what a checkpoint
// records of the codec: its name, and with states the ranks and buckets.
func codecMeta(meta map[string]string, cfg config, codec compress.Codec, ranks int, buckets []*dp.Bucket) map[string]string {
	meta[metaCodec] = compress.StateName(codec)
	if compress.Stateful(codec) {
		meta[metaRanks] = strconv.Itoa(ranks)
		meta[metaBuckets] = bucketLayout(buckets)
		meta[metaBucketMB] = strconv.FormatFloat(cfg.bucketMB, 'g', -1, 64)
	}
	return meta
}

// bucketLayout is the buckets' element ranges: "0-1200,1200-1500".
func bucketLayout(buckets []*dp.Bucket) string {
	s := make([]string, len(buckets))
	for i, b := range buckets {
		s[i] = fmt.Sprintf("%d-%d", b.Lo, b.Hi)
	}
	return strings.Join(s, ",")
}

// gatherCodec gathers every rank's codec state into rank 0's blobs (nil
// without a stateful codec). Every rank calls it at each save.
func gatherCodec(ctx context.Context, c *spmd.Comm, codec compress.Codec) (map[string][]byte, error) {
	states, err := compress.GatherStates(ctx, c, codec, 0)
	if err != nil || states == nil {
		return nil, err
	}
	blobs := make(map[string][]byte, len(states))
	for r, s := range states {
		blobs[blobName(r)] = s
	}
	return blobs, nil
}

// savedCodec is what rank 0 read of a checkpoint's codec state.
type savedCodec struct {
	meta  map[string]string // the checkpoint's user metadata
	blobs map[string][]byte
	path  string // the checkpoint file, for messages
	dir   string // --ckpt, for notes
}

// plan compares the saved codec state with this run's codec at work
// (nil where --compress has nothing to do: idle says why), ranks and
// buckets, and returns the states to restore (nil: none), a note line
// for the run to print, or an error that says what differs and what to
// pass.
func (s *savedCodec) plan(cfg config, codec compress.Codec, idle string, ranks int, buckets []*dp.Bucket) (states [][]byte, note string, err error) {
	saved, has := s.meta[metaRanks]
	name := s.meta[metaCodec]
	switch {
	case !has && compress.Stateful(codec):
		return nil, fmt.Sprintf("note: the checkpoint in %s has no codec state (saved without --compress %s, or before checkpoints carried it): the residuals start from zero", s.dir, compress.StateName(codec)), nil
	case !has:
		return nil, "", nil
	case !compress.Stateful(codec):
		return nil, fmt.Sprintf("note: the checkpoint in %s carries the codec state of --compress %s, which this run (--compress %s) does not use%s", s.dir, name, cfg.compress, workload.IdleCodec(idle)), nil
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%s: %w: %s", s.path, nn.ErrCheckpoint, fmt.Sprintf(format, args...))
	}
	if want := compress.StateName(codec); name != want {
		return nil, "", bad("it carries the codec state of --compress %s, which this run's --compress %s cannot take: pass --compress %s, or resume without --compress (the state is dropped), or another --ckpt", name, cfg.compress, name)
	}
	n, err := strconv.Atoi(saved)
	if err != nil || n < 1 {
		return nil, "", bad("its codec state is of %q ranks, not a number", saved)
	}
	if n != ranks {
		return nil, "", bad("it carries the codec states of %d ranks, one each, which cannot be re-split for %d: run it on %d ranks (gorun -np %d), or resume without --compress (the state is dropped), or another --ckpt", n, ranks, n, n)
	}
	if layout := bucketLayout(buckets); s.meta[metaBuckets] != layout {
		return nil, "", bad("its codec state is keyed by %d buckets that --bucket-mb %s cut; this run's --bucket-mb %g cuts %d others: pass --bucket-mb %s, or another --ckpt",
			strings.Count(s.meta[metaBuckets], ",")+1, s.meta[metaBucketMB], cfg.bucketMB, len(buckets), s.meta[metaBucketMB])
	}
	states = make([][]byte, n)
	for r := range states {
		b, ok := s.blobs[blobName(r)]
		if !ok {
			return nil, "", bad("it records the codec states of %d ranks and lacks rank %d's (%s)", n, r, blobName(r))
		}
		states[r] = b
	}
	return states, "", nil
}

// shareCodec restores each rank's codec state from what rank 0 read
// (saved, nil on the other ranks and when nothing was loaded): rank 0
// plans and tells the others whether states follow, and scatters them.
// It returns a note for rank 0 to print. A refusal returns on rank 0
// before it tells the others, which wait until gorun stops them, as they
// wait in DDP's broadcast when rank 0 refuses the checkpoint's flags: so
// rank 0 fails first, and gorun shows its error.
func shareCodec(ctx context.Context, c *spmd.Comm, saved *savedCodec, cfg config, codec compress.Codec, idle string, buckets []*dp.Bucket) (string, error) {
	var (
		states [][]byte
		note   string
		err    error
	)
	follow := []int32{0}
	if c.Rank() == 0 && saved != nil {
		states, note, err = saved.plan(cfg, codec, idle, c.Size(), buckets)
		if states != nil {
			follow[0] = 1
		}
	}
	if err := workload.RootSays(ctx, c, err, 0); err != nil {
		return "", err
	}
	if err := prims.Broadcast(ctx, c, follow, 0); err != nil {
		return "", fmt.Errorf("resume: %w", err)
	}
	if follow[0] == 1 {
		if err := compress.ScatterStates(ctx, c, codec, states, 0); err != nil {
			return "", fmt.Errorf("resume: %w", err)
		}
	}
	return note, nil
}
