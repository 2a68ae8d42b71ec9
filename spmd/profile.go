package spmd

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/gorun-hpc/gorun/spmd/trace"
)

// clockTag is the collective-context tag of the clock ping-pongs.
const clockTag = barrierTag - 2

// clockRounds is how many ping-pongs each rank makes with rank 0; the one
// with the shortest round trip gives the offset, as Score-P and Horovod
// estimate theirs.
const clockRounds = 10

// newRecorder opens the trace file of this rank (gorun --profile), after
// moving this rank's files of the job's earlier start out of its way.
func newRecorder(env Env, hostname string) (*trace.Recorder, error) {
	if err := keepEarlierStart(env); err != nil {
		return nil, err
	}
	h := trace.Header{Rank: env.Rank, Size: env.Size, Job: env.JobID, Host: hostname, Program: strings.Join(os.Args, " "), Restart: env.RestartCount}
	return trace.New(env.ProfileDir, h)
}

// keepEarlierStart moves this rank's trace and CPU profile of an earlier
// start of a restarted job (gorun --max-restarts) to trace.StartDir of the
// start that wrote them (its header says which; the start before this one
// when it cannot be read), where this start would have overwritten them.
func keepEarlierStart(env Env) error {
	if env.RestartCount == 0 {
		return nil
	}
	h, err := trace.ReadHeader(filepath.Join(env.ProfileDir, trace.FileName(env.Rank)))
	if errors.Is(err, fs.ErrNotExist) {
		return nil // this rank left no trace, or its file has been moved
	}
	k := env.RestartCount - 1
	if err == nil && h.Restart < k {
		k = h.Restart
	}
	dst := trace.StartDir(env.ProfileDir, k)
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("keeping the trace of the job's start %d: %w", k, err)
	}
	for _, name := range []string{trace.FileName(env.Rank), cpuProfileName(env.Rank)} {
		err := os.Rename(filepath.Join(env.ProfileDir, name), filepath.Join(dst, name))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("keeping the trace of the job's start %d: %w", k, err)
		}
	}
	return nil
}

// cpuProfileName is the name of rank's CPU profile in the profile
// directory (gorun --profile-cpu).
func cpuProfileName(rank int) string { return fmt.Sprintf("rank.%d.cpu.pprof", rank) }

// startProfile measures the clock offset to rank 0 into rec, makes rec the
// process's recorder for regions, and starts the CPU profile when asked.
func (w *World) startProfile(ctx context.Context, rec *trace.Recorder) error {
	if err := w.syncClock(ctx, rec); err != nil {
		return fmt.Errorf("measuring the clock offset to rank 0 for the trace: %w", err)
	}
	trace.SetDefault(rec)
	if !w.env.ProfileCPU {
		return nil
	}
	path := filepath.Join(w.env.ProfileDir, cpuProfileName(w.Rank()))
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("CPU profile %s: %w", path, err)
	}
	w.closers = append(w.closers, func() error {
		pprof.StopCPUProfile()
		return f.Close()
	})
	return nil
}

// syncClock estimates this rank's clock offset to rank 0's, with every
// rank of the world: each other rank in turn sends rank 0 clockRounds
// pings, each answered with rank 0's clock, and keeps the answer of the
// shortest round trip, taken as read at its midpoint.
func (w *World) syncClock(ctx context.Context, rec *trace.Recorder) error {
	cc := w.Comm.Collective()
	if cc.Size() == 1 {
		rec.SetClock(0, 0)
		return nil
	}
	var b [8]byte
	if cc.Rank() == 0 {
		for r := 1; r < cc.Size(); r++ {
			for i := 0; i < clockRounds; i++ {
				if _, err := cc.Recv(ctx, r, clockTag, nil); err != nil {
					return err
				}
				binary.LittleEndian.PutUint64(b[:], uint64(rec.Now()))
				if err := cc.Send(ctx, r, clockTag, b[:]); err != nil {
					return err
				}
			}
		}
		rec.SetClock(0, 0)
		return nil
	}
	best, offset := int64(-1), int64(0)
	for i := 0; i < clockRounds; i++ {
		t0 := rec.Now()
		if err := cc.Send(ctx, 0, clockTag, nil); err != nil {
			return err
		}
		if n, err := cc.Recv(ctx, 0, clockTag, b[:]); err != nil || n != 8 {
			if err == nil {
				err = fmt.Errorf("rank 0 answered %d bytes", n)
			}
			return err
		}
		t1 := rec.Now()
		if rtt := t1 - t0; best < 0 || rtt < best {
			best = rtt
			offset = int64(binary.LittleEndian.Uint64(b[:])) - (t0+t1)/2
		}
	}
	rec.SetClock(time.Duration(offset), time.Duration(best))
	return nil
}
