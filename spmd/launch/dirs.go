package launch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// prepareDirs makes the directories of cfg absolute and creates the output
// and profile directories.
func prepareDirs(cfg *Config) error {
	if cfg.Wdir != "" {
		fi, err := os.Stat(cfg.Wdir)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return errorf(ErrUsage, "--wdir %s: no such directory; create it, or give one that exists", cfg.Wdir)
		case err != nil:
			return errorf(ErrUsage, "--wdir %s: %v", cfg.Wdir, err)
		case !fi.IsDir():
			return errorf(ErrUsage, "--wdir %s: not a directory", cfg.Wdir)
		}
	}
	for _, d := range []struct {
		flag string
		dir  *string
	}{{"--output-dir", &cfg.OutputDir}, {"--profile", &cfg.ProfileDir}} {
		if *d.dir == "" {
			continue
		}
		abs, err := filepath.Abs(*d.dir)
		if err != nil {
			return err
		}
		if err := writableDir(abs); err != nil {
			return errorf(ErrUsage, "%s %s: %v; give a directory gorun can create and write", d.flag, *d.dir, err)
		}
		*d.dir = abs
	}
	return nil
}

// writableDir creates dir where it is missing and checks that a file can be
// created in it, so that a job does not start (or build) only to fail at
// its first output file or, for --profile, leave its ranks unable to
// write their traces at the end.
func writableDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return fmt.Errorf("cannot create %s: %v", pe.Path, pe.Err)
		}
		return err
	}
	f, err := os.CreateTemp(dir, ".gorun-probe-*")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("cannot write in it: %v", err)
	}
	f.Close()
	return os.Remove(f.Name())
}
