//go:build !unix

package safetensors

import (
	"errors"
	"os"
)

// lockTemp has no lock to take here: without flock, removeStale cannot
// tell a crashed writer's temporary file from a live one's, and leaves
// them all.
func lockTemp(*os.File) error { return errors.ErrUnsupported }

// tryLock never takes a lock here.
func tryLock(*os.File) bool { return false }

// closeBeforeRename is true: Windows does not rename an open file.
const closeBeforeRename = true
