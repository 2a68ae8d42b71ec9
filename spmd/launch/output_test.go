package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func TestOutputLines(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tag    bool
		stamp  bool
		max    int
		writes []string
		want   string
	}{
		{"plain", false, false, 0, []string{"a\nb\n"}, "a\nb\n"},
		{"split writes", false, false, 0, []string{"he", "llo\nwo", "rld\n"}, "hello\nworld\n"},
		{"partial flushed at close", false, false, 0, []string{"no newline"}, "no newline\n"},
		{"empty lines", false, false, 0, []string{"\n\n"}, "\n\n"},
		{"tag", true, false, 0, []string{"x\ny\n"}, "[7] x\n[7] y\n"},
		{"timestamp and tag", true, true, 0, []string{"x\n"}, "2001-02-03T04:05:06.007 [7] x\n"},
		{"long line in chunks", false, false, 4, []string{"abcdefghij\n"}, "abcd\nefgh\nij\n"},
		{"long line across writes", true, false, 4, []string{"ab", "cdef", "g"}, "[7] abcd\n[7] efg\n"},
		{"exactly max", false, false, 4, []string{"abcd\nab\n"}, "abcd\nab\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			o := newOutput(&stdout, &stderr)
			o.Tag, o.Timestamp, o.MaxLine = tc.tag, tc.stamp, tc.max
			o.Now = func() time.Time { return time.Date(2001, 2, 3, 4, 5, 6, 7e6, time.Local) }
			w, _, err := o.RankWriters(7, "")
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.writes {
				w.Write([]byte(s))
			}
			w.Close()
			if stdout.String() != tc.want {
				t.Errorf("got %q, want %q", stdout.String(), tc.want)
			}
		})
	}
}

// TestOutputNoInterleaving writes lines from many ranks at once in odd
// pieces; every line must come out whole.
func TestOutputNoInterleaving(t *testing.T) {
	var stdout, stderr bytes.Buffer
	o := newOutput(&stdout, &stderr)
	o.Tag = true
	// A writer descheduled mid-line for the pause (under -race on 2
	// cores) would have its partial line forwarded (TestOutputPrompt).
	o.PartialAfter = time.Hour
	const ranks, lines = 8, 200
	var wg sync.WaitGroup
	for r := 0; r < ranks; r++ {
		w, _, _ := o.RankWriters(r, "")
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer w.Close()
			var all strings.Builder
			for i := 0; i < lines; i++ {
				fmt.Fprintf(&all, "rank %d line %d %s\n", r, i, strings.Repeat("x", i%37))
			}
			b := []byte(all.String())
			for len(b) > 0 {
				n := min(len(b), 1+len(b)%13)
				w.Write(b[:n])
				b = b[n:]
			}
		}()
	}
	wg.Wait()
	got := strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n")
	if len(got) != ranks*lines {
		t.Fatalf("%d lines, want %d", len(got), ranks*lines)
	}
	next := make([]int, ranks)
	for _, l := range got {
		var r, r2, i int
		var xs string
		if _, err := fmt.Sscanf(l, "[%d] rank %d line %d %s", &r, &r2, &i, &xs); err != nil && i%37 != 0 {
			t.Fatalf("mangled line %q: %v", l, err)
		}
		if r != r2 || i != next[r] || len(xs) != i%37 {
			t.Fatalf("line %q out of place (want rank %d line %d)", l, r, next[r])
		}
		next[r]++
	}
}

// TestOutputPrompt: a partial line (a prompt) is forwarded, with its
// prefix, once it has waited the pause for its newline, and the rest of the
// line follows it without another prefix; it was held until its newline,
// so that an interactive rank 0 seemed to hang.
func TestOutputPrompt(t *testing.T) {
	var stdout, stderr bytes.Buffer
	o := newOutput(&stdout, &stderr)
	o.Tag = true
	o.PartialAfter = 10 * time.Millisecond
	read := func() string {
		o.stdout.mu.Lock()
		defer o.stdout.mu.Unlock()
		return stdout.String()
	}
	w, _, _ := o.RankWriters(3, "")
	w.Write([]byte("done\nEnter a value: "))
	deadline := time.Now().Add(10 * time.Second)
	for read() != "[3] done\n[3] Enter a value: " {
		if time.Now().After(deadline) {
			t.Fatalf("the prompt was not forwarded: %q", read())
		}
		time.Sleep(time.Millisecond)
	}
	w.Write([]byte("42\nnext"))
	w.Close()
	if got, want := read(), "[3] done\n[3] Enter a value: 42\n[3] next\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestOutputPartialNotMixed: another rank's line, or gorun's own, ends a
// partial line left open first, so that lines are never mixed; a \r in a
// tagged line is followed by the tag again. Other ranks' lines landed in
// the middle of rank 0's progress bar, and its \r erased the tag. Where
// stdout and stderr are one file (a terminal), either ends the other's
// open line.
func TestOutputPartialNotMixed(t *testing.T) {
	var stdout, stderr bytes.Buffer
	o := newOutput(&stdout, &stderr)
	o.Tag = true
	o.PartialAfter = time.Hour // flushed by hand below
	r0, _, _ := o.RankWriters(0, "")
	r1, r1err, _ := o.RankWriters(1, "")
	flush := func(w io.Writer) {
		lw := w.(*lineWriter)
		lw.mu.Lock()
		armed := lw.armed
		lw.mu.Unlock()
		lw.flushPartial(armed)
	}
	r0.Write([]byte("\rtrain 0"))
	flush(r0)
	r1.Write([]byte("log 1\n"))
	r0.Write([]byte("\rtrain 1"))
	flush(r0)
	r1err.Write([]byte("on stderr\n")) // another file: rank 0's line stays open
	r0.Write([]byte(" done"))
	flush(r0)
	o.Logf("stopping")
	r0.Close()
	want := "[0] \r[0] train 0\n[1] log 1\n[0] \r[0] train 1 done\n"
	if got := stdout.String(); got != want {
		t.Errorf("stdout %q, want %q", got, want)
	}
	if got, want := stderr.String(), "[1] on stderr\ngorun: stopping\n"; got != want {
		t.Errorf("stderr %q, want %q", got, want)
	}

	var both bytes.Buffer
	o = newOutput(&both, &both)
	o.PartialAfter = time.Hour
	r0, _, _ = o.RankWriters(0, "")
	_, r1err, _ = o.RankWriters(1, "")
	r0.Write([]byte("prompt> "))
	flush(r0)
	r1err.Write([]byte("warning\n"))
	o.Logf("rank 1 exited")
	r0.Close()
	if got, want := both.String(), "prompt> \nwarning\ngorun: rank 1 exited\n"; got != want {
		t.Errorf("one file: %q, want %q", got, want)
	}
}

func TestOutputDir(t *testing.T) {
	dir := t.TempDir()
	var stdout, stderr bytes.Buffer
	o := newOutput(&stdout, &stderr)
	o.Tag = true
	out, errw, err := o.RankWriters(3, dir)
	if err != nil {
		t.Fatal(err)
	}
	out.Write([]byte("one\ntwo"))
	errw.Write([]byte("oops\n"))
	out.Close()
	errw.Close()
	for file, want := range map[string]string{"rank.3.out": "one\ntwo", "rank.3.err": "oops\n"} {
		b, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", file, b, err, want)
		}
	}
	if stdout.String() != "[3] one\n[3] two\n" || stderr.String() != "[3] oops\n" {
		t.Errorf("stdout %q stderr %q", stdout.String(), stderr.String())
	}
}

func BenchmarkOutputLines(b *testing.B) {
	var sink bytes.Buffer
	o := newOutput(&sink, &sink)
	o.Tag = true
	w, _, _ := o.RankWriters(0, "")
	chunk := []byte(strings.Repeat("some output of a rank\n", 100))
	b.SetBytes(int64(len(chunk)))
	for i := 0; i < b.N; i++ {
		sink.Reset()
		w.Write(chunk)
	}
}

// --verbose lines carry the time of day to the microsecond after "gorun: ",
// as the ranks' verbose lines do, so that both read as one timeline.
func TestVerboseLinesTimed(t *testing.T) {
	var errs bytes.Buffer
	o := newOutput(&bytes.Buffer{}, &errs)
	before := time.Now()
	o.Verbosef("started rank %d", 3)
	line := errs.String()
	rest, ok := strings.CutPrefix(line, "gorun: ")
	stamp, msg, _ := strings.Cut(rest, " ")
	if !ok || msg != "started rank 3\n" {
		t.Fatalf("verbose line %q, want gorun: TIME started rank 3", line)
	}
	at, err := time.ParseInLocation(verboseTime, stamp, time.Local)
	if err != nil || len(stamp) != len("15:04:05.000000") {
		t.Fatalf("verbose line %q: time %q is not hh:mm:ss.micro (%v)", line, stamp, err)
	}
	// The call's time of day, to within a second (around midnight, a day
	// off either way).
	at = time.Date(before.Year(), before.Month(), before.Day(), at.Hour(), at.Minute(), at.Second(), at.Nanosecond(), before.Location())
	for _, d := range []time.Duration{0, 24 * time.Hour, -24 * time.Hour} {
		if off := at.Add(d).Sub(before); off > -time.Millisecond && off < time.Second {
			return
		}
	}
	t.Errorf("verbose line %q: time %s, called at %s", line, stamp, before.Format(verboseTime))
}

// failWriter fails every write with err and counts the writes.
type failWriter struct {
	err    error
	writes int
}

func (w *failWriter) Write(p []byte) (int, error) {
	w.writes++
	return 0, w.err
}

// TestOutputWriteError: the first write error on gorun's stdout is kept,
// named by the stream, and told (failed is closed); nothing more is
// written there, and gorun's lines on stderr go on. Errors were ignored.
func TestOutputWriteError(t *testing.T) {
	full := &failWriter{err: &fs.PathError{Op: "write", Path: "/dev/stdout", Err: syscall.ENOSPC}}
	var stderr bytes.Buffer
	o := newOutput(full, &stderr)
	w, _, _ := o.RankWriters(0, "")
	w.Write([]byte("one\ntwo\n"))
	w.Close()
	select {
	case <-o.failed:
	default:
		t.Fatal("failed not closed after a failed write")
	}
	if err := o.writeErr(); err == nil || err.Error() != "writing to stdout: no space left on device" || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("writeErr %v, want writing to stdout: ENOSPC", err)
	}
	if full.writes != 1 {
		t.Errorf("%d writes to the failed stdout, want 1", full.writes)
	}
	o.Logf("still here")
	if stderr.String() != "gorun: still here\n" {
		t.Errorf("stderr %q", stderr.String())
	}
	if got := o.settle(0); got != 1 || !strings.Contains(stderr.String(), "gorun: writing to stdout: no space left on device\n") {
		t.Errorf("settle(0) = %d, stderr %q; want 1 and the error said", got, stderr.String())
	}
	if got := o.settle(3); got != 3 {
		t.Errorf("settle(3) = %d, want the job's 3", got)
	}
}

// fullDir is a directory whose rank.0.out is /dev/full: writes to it fail
// with ENOSPC, as on a full disk.
func fullDir(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	if err := os.Symlink("/dev/full", filepath.Join(dir, "rank.0.out")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestOutputDirWriteError: a write error on a file of --output-dir is
// said at once, in one line naming the file and the error; the job goes
// on, its output still reaching gorun's stdout, the other files whole,
// and gorun's status is 1 where it would have been 0. The error was lost
// and the job exited 0. The files of ranks on other hosts are written
// here, from their agents' output frames, through the same tee.
func TestOutputDirWriteError(t *testing.T) {
	const want = "gorun: --output-dir: write %s: no space left on device; the file ends there, the job goes on (that output still goes to gorun's stdout), and gorun will not exit with status 0\n"
	t.Run("local", func(t *testing.T) {
		dir := fullDir(t)
		var stdout, stderr syncWriter
		l := &Launcher{Stdout: &stdout, Stderr: &stderr}
		cfg := DefaultConfig()
		cfg.NP, cfg.Program, cfg.Quiet, cfg.OutputDir, cfg.TagOutput = 2, "/bin/sh", true, dir, true
		cfg.Args = []string{"-c", `echo "out $GORUN_RANK"; echo "err $GORUN_RANK" >&2`}
		code, err := l.Run(context.Background(), cfg)
		line := fmt.Sprintf(want, filepath.Join(dir, "rank.0.out"))
		if err != nil || code != 1 || !strings.Contains(stderr.String(), line) || strings.Count(stderr.String(), "gorun:") != 1 {
			t.Errorf("status %d (%v), stderr %q; want 1 and %q alone", code, err, stderr.String(), line)
		}
		if got := lines(stdout.String()); strings.Join(got, "|") != "[0] out 0|[1] out 1" {
			t.Errorf("stdout %q, want both ranks' lines", stdout.String())
		}
		for file, w := range map[string]string{"rank.1.out": "out 1\n", "rank.0.err": "err 0\n", "rank.1.err": "err 1\n"} {
			if b, err := os.ReadFile(filepath.Join(dir, file)); err != nil || string(b) != w {
				t.Errorf("%s = %q, %v; want %q", file, b, err, w)
			}
		}
	})
	t.Run("remote", func(t *testing.T) {
		dir := fullDir(t)
		var stdout, stderr syncWriter
		out := newOutput(&stdout, &stderr)
		c := newTestCluster(1, 32, out)
		so, se, err := out.RankWriters(0, dir)
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.Start(&spec{Rank: rankPlan{Rank: 0, Host: "h1"}, Stdout: so, Stderr: se})
		if err != nil {
			t.Fatal(err)
		}
		rp := p.(*remoteProc)
		rp.frame(frame{Type: frameOutput, Host: 1, Payload: []byte("\x01hello\n")})
		rp.frame(jsonFrame(frameExited, 1, 0, exitMsg{}))
		if st := p.Wait(); !st.Success() {
			t.Fatalf("rank 0 %v", st)
		}
		// (Sending the start frame to no agent says "no route to host 1".)
		if stdout.String() != "hello\n" || !strings.Contains(stderr.String(), fmt.Sprintf(want, filepath.Join(dir, "rank.0.out"))) {
			t.Errorf("stdout %q, stderr %q", stdout.String(), stderr.String())
		}
		if got := out.settle(0); got != 1 {
			t.Errorf("settle(0) = %d, want 1", got)
		}
	})
}

func lines(s string) []string {
	l := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	slices.Sort(l)
	return l
}

// TestOutputDirCutShort: after the first file of a start that a write
// error cut short, which is said at once, the others are named in one
// line at the start's end, not one line each.
func TestOutputDirCutShort(t *testing.T) {
	dir := fullDir(t)
	if err := os.Symlink("/dev/full", filepath.Join(dir, "rank.0.err")); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	o := newOutput(io.Discard, &stderr)
	so, se, err := o.RankWriters(0, dir)
	if err != nil {
		t.Fatal(err)
	}
	so.Write([]byte("out\n"))
	se.Write([]byte("err\n"))
	se.Write([]byte("more\n"))
	so.Close()
	se.Close()
	if n := strings.Count(stderr.String(), "gorun: --output-dir: "); n != 1 {
		t.Errorf("%d --output-dir lines before the start's end, want 1:\n%s", n, stderr.String())
	}
	o.cutShort()
	want := "gorun: --output-dir: 1 more file cut short by write errors: " + filepath.Join(dir, "rank.0.err") + "\n"
	if !strings.HasSuffix(stderr.String(), want) {
		t.Errorf("stderr %q, want it to end %q", stderr.String(), want)
	}
}
