package launch

// The files of --output-dir: each rank's bytes, unchanged, beside the
// lines that output forwards; what a write error to them does; and how a
// restarted job keeps each start's.

import (
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// tee writes raw bytes to a file of --output-dir and to the line writer.
// A write error ends the file, not the lines: the first is told to out
// (fileFailed), and nothing more is written to the file, as tee(1) goes
// on with its other outputs.
type tee struct {
	file  *os.File
	lines io.WriteCloser
	out   *output
	what  string // "stdout" or "stderr": the stream the lines go to
	err   error  // the first error writing or closing the file
}

func (t *tee) Write(p []byte) (int, error) {
	if t.err == nil {
		if _, err := t.file.Write(p); err != nil {
			t.fail(err)
		}
	}
	return t.lines.Write(p)
}

// Close closes the line writer and the file; a close that fails (where
// a file system reports a write's error only then: NFS) is told as a
// write error is.
func (t *tee) Close() error {
	t.lines.Close()
	if err := t.file.Close(); err != nil && t.err == nil {
		t.fail(err)
	}
	return t.err
}

func (t *tee) fail(err error) {
	t.err = err
	t.out.fileFailed(t.file.Name(), t.what, err)
}

// fileFailed is told that a write to the --output-dir file path failed
// with err ("write DIR/rank.0.out: no space left on device"): the first
// of a start says so at once; the others are named at the start's end
// (cutShort). The job goes on: its output still reaches gorun's stdout
// and stderr (what says which), and a training job is not stopped for a
// copy of its log; but gorun will not exit 0 (settle).
func (o *output) fileFailed(path, what string, err error) {
	o.failMu.Lock()
	o.cut = append(o.cut, path)
	first := len(o.cut) == 1
	o.anyCut = true
	o.failMu.Unlock()
	if first { // not under failMu: a failed write to stderr takes it
		o.Logf("--output-dir: %v; the file ends there, the job goes on (that output still goes to gorun's %s), and gorun will not exit with status 0", err, what)
	}
}

// cutShort says which files of --output-dir, besides the first, which was
// said, a write error cut short in the start that has ended.
func (o *output) cutShort() {
	o.failMu.Lock()
	cut := o.cut
	o.cut = nil
	o.failMu.Unlock()
	if len(cut) > 1 {
		n := len(cut) - 1
		o.Logf("--output-dir: %d more %s cut short by write errors: %s", n, plural(n, "file"), strings.Join(cut[1:], ", "))
	}
}

// keepStartOutput moves the files that start k of a restarted job wrote
// to an --output-dir, DIR/rank.N.out and .err, into DIR/start.K, as the
// ranks keep their traces (--profile), so that the next start's do not
// write over the output of the failure that restarted the job.
func keepStartOutput(dir string, k int) error {
	if dir == "" {
		return nil
	}
	files, err := filepath.Glob(filepath.Join(dir, "rank.*.[oe][ur][tr]"))
	if err != nil || len(files) == 0 {
		return err
	}
	to := filepath.Join(dir, "start."+strconv.Itoa(k))
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		if err := os.Rename(f, filepath.Join(to, filepath.Base(f))); err != nil {
			return err
		}
	}
	return nil
}
