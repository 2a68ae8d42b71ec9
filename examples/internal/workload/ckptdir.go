package workload

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"syscall"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd"
)

// CheckCheckpointDir checks at start-up that --ckpt dir can hold the
// program's checkpoints, so that a bad path fails before training rather
// than at the first save after it. The ranks of c that will write there
// (check set: rank 0 of examples/ddp, every rank of a sharded checkpoint)
// create dir if it is missing, and create and remove a file in it; then
// the ranks agree (prims.Agree): the rank that found a problem returns
// WritableDir's error, the others one that points at it. Every rank of c
// calls it; with dir "" (no --ckpt) it does nothing.
func CheckCheckpointDir(ctx context.Context, c *spmd.Comm, dir string, check bool) error {
	if dir == "" {
		return nil
	}
	var err error
	if check {
		err = WritableDir(dir)
	}
	return prims.Agree(ctx, c, err, "checking --ckpt "+dir)
}

// NothingToResume reports whether a --resume from dir is bound to fail
// for want of a checkpoint: dir is missing, and no gorun --max-restarts
// start (maxRestarts 0) would train from step 0 in it. A program checks
// dir (CheckCheckpointDir) only where it is not, so that the failed
// resume leaves no empty directory behind.
func NothingToResume(dir string, resume bool, maxRestarts int) bool {
	_, err := os.Stat(dir)
	return resume && maxRestarts == 0 && errors.Is(err, fs.ErrNotExist)
}

// WritableDir creates dir if it is missing and creates and removes a
// file in it. Its error names --ckpt and dir and says what to pass.
func WritableDir(dir string) error {
	if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
		return fmt.Errorf("--ckpt %s: it is a file, not a directory: pass a directory for the checkpoint (it is created if missing)", dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		if errors.Is(err, syscall.ENOTDIR) {
			return fmt.Errorf("--ckpt %s: cannot create the directory, a part of its path is a file (%w): pass a directory for the checkpoint", dir, err)
		}
		return fmt.Errorf("--ckpt %s: cannot create the directory (%w): pass a directory this user can create and write", dir, err)
	}
	f, err := os.CreateTemp(dir, ".ckpt-probe-*")
	if err != nil {
		return fmt.Errorf("--ckpt %s: cannot write in the directory (%w): pass a directory this user can write, or change its permissions", dir, err)
	}
	name := f.Name()
	err = f.Close()
	if rerr := os.Remove(name); err == nil {
		err = rerr
	}
	if err != nil {
		return fmt.Errorf("--ckpt %s: cannot write in the directory (%w): pass a directory this user can write, or change its permissions", dir, err)
	}
	return nil
}
