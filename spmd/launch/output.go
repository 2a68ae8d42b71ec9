package launch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// defaultMaxLine is the longest line Output holds back: a rank that writes
// more without a newline has it forwarded in pieces of this size, each
// ending with a newline.
const defaultMaxLine = 64 << 10

// timestampLayout is how --timestamp-output writes the time of a line.
const timestampLayout = "2006-01-02T15:04:05.000"

// output puts the lines of every rank, and gorun's own messages, onto one
// stdout and one stderr so that no line is interleaved with another. It is
// safe for concurrent use; each writer it returns is for one goroutine.
type output struct {
	Tag       bool             // prefix "[rank] "
	Timestamp bool             // prefix the time the line was complete
	MaxLine   int              // 0: defaultMaxLine
	Now       func() time.Time // nil: time.Now
	// PartialAfter is how long a partial line waits for its newline;
	// 0: partialAfter.
	PartialAfter time.Duration

	// One lock per stream, so that a reader of gorun's stdout that stops
	// reading holds up the lines bound there, not gorun's messages on
	// stderr (such as the one that says the job timed out).
	stdout *stream
	stderr *stream

	// failed is closed at the first write error on stdout or stderr,
	// which the supervisor stops the job for (a Unix filter fails when
	// its output does).
	failed chan struct{}
	failMu sync.Mutex // protects following
	err    error      // that error, naming the stream
	// cut are the --output-dir files of this start that a write error
	// cut short, the first of which was said (fileFailed); anyCut: some
	// file of any start was, and gorun will not exit 0.
	cut    []string
	anyCut bool
}

// stream is one of gorun's output streams and the lock its writes hold.
type stream struct {
	name string // "stdout" or "stderr", for messages

	mu  sync.Mutex // protects writes to w, and err
	w   io.Writer
	err error // the first error writing w: nothing is written after it
	// failed is told of err, once.
	failed func(error)
	// open says which rank's line is open on w: a partial line forwarded
	// without its newline. The two streams share one where they are one
	// file (a terminal), so that either ends the other's open line.
	open *openLine
}

// openLine is the line left open on one file; its lock is taken after a
// stream's.
type openLine struct {
	mu sync.Mutex
	w  *lineWriter // nil: none
}

// Write writes p, a whole line of gorun's own or raw output, ending first
// a rank's line left open.
func (s *stream) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open.mu.Lock()
	defer s.open.mu.Unlock()
	if s.open.w != nil {
		s.open.w = nil
		if err := s.write([]byte{'\n'}); err != nil {
			return 0, err
		}
	}
	if err := s.write(p); err != nil {
		return 0, err
	}
	return len(p), nil
}

// write writes p to w, where no write has failed before; the first error
// is kept and told. Its caller holds mu.
func (s *stream) write(p []byte) error {
	if s.err != nil {
		return s.err
	}
	if _, err := s.w.Write(p); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) { // "write /dev/stdout: ...": the stream is named here
			err = pe.Err
		}
		s.err = fmt.Errorf("writing to %s: %w", s.name, err)
		if s.failed != nil {
			s.failed(s.err)
		}
		return s.err
	}
	return nil
}

// piece writes one piece of w's current line in one write: with o's
// prefix where the line is not the one open (its first piece, or one after
// another rank's output ended it), and after each \r of it (a progress bar
// that redraws its line keeps its prefix); with a newline where end is.
// Another rank's line left open is ended first, so that lines are never
// mixed.
func (s *stream) piece(o *output, w *lineWriter, p []byte, end bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.open.mu.Lock()
	defer s.open.mu.Unlock()
	var b bytes.Buffer
	cont := s.open.w == w
	if s.open.w != nil && !cont {
		b.WriteByte('\n')
	}
	pre := o.prefix(w.rank)
	if !cont {
		b.WriteString(pre)
	}
	if pre == "" {
		b.Write(p)
	} else {
		for {
			i := bytes.IndexByte(p, '\r')
			if i < 0 {
				b.Write(p)
				break
			}
			b.Write(p[:i+1])
			b.WriteString(pre)
			p = p[i+1:]
		}
	}
	if end {
		b.WriteByte('\n')
		s.open.w = nil
	} else {
		s.open.w = w
	}
	s.write(b.Bytes()) // an error is told to the supervisor (output.failed)
}

// isOpen says whether w's line is the one open.
func (s *stream) isOpen(w *lineWriter) bool {
	s.open.mu.Lock()
	defer s.open.mu.Unlock()
	return s.open.w == w
}

// newOutput returns an Output onto stdout and stderr.
func newOutput(stdout, stderr io.Writer) *output {
	o := &output{failed: make(chan struct{})}
	o.stdout = &stream{name: "stdout", w: stdout, open: &openLine{}, failed: o.streamFailed}
	o.stderr = &stream{name: "stderr", w: stderr, open: &openLine{}, failed: o.streamFailed}
	if sameFile(stdout, stderr) {
		o.stderr.open = o.stdout.open
	}
	return o
}

// streamFailed keeps the first write error on stdout or stderr and closes
// failed.
func (o *output) streamFailed(err error) {
	o.failMu.Lock()
	defer o.failMu.Unlock()
	if o.err == nil {
		o.err = err
		close(o.failed)
	}
}

// writeErr is the first write error on gorun's stdout or stderr: "writing
// to stdout: no space left on device"; nil: none.
func (o *output) writeErr() error {
	o.failMu.Lock()
	defer o.failMu.Unlock()
	return o.err
}

// sameFile says whether a and b write to one file: one terminal, or one
// file that 2>&1 made both.
func sameFile(a, b io.Writer) bool {
	if ba, ok := a.(*bytes.Buffer); ok { // tests
		bb, ok := b.(*bytes.Buffer)
		return ok && ba == bb
	}
	fa, ok1 := a.(*os.File)
	fb, ok2 := b.(*os.File)
	if !ok1 || !ok2 {
		return false
	}
	sa, err1 := fa.Stat()
	sb, err2 := fb.Stat()
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}

// closed reports whether the reader of gorun's stdout or stderr has gone
// (closedPipe).
func (o *output) closed() bool { return closedPipe(o.stdout.w) || closedPipe(o.stderr.w) }

// settle is the exit status of a job that its ranks, and the supervisor,
// gave status: where that is 0 but a write to gorun's stdout or stderr
// failed after the supervisor's last look (a line of the job's end), it
// says so and returns 1, or quietly 141 for a closed pipe, as the
// supervisor would have.
//
// Where a write error cut a file of --output-dir short (fileFailed), which
// was said when it came, a status of 0 is 1 too.
func (o *output) settle(status int) int {
	err := o.writeErr()
	o.failMu.Lock()
	cut := o.anyCut
	o.failMu.Unlock()
	switch {
	case status != 0:
		return status
	case err != nil && errors.Is(err, syscall.EPIPE):
		return 128 + int(syscall.SIGPIPE)
	case err != nil:
		o.Logf("%v", err)
		return 1
	case cut:
		return 1
	}
	return 0
}

// Logf writes one line "gorun: ..." to stderr.
func (o *output) Logf(format string, args ...any) {
	msg := fmt.Sprintf("gorun: "+format, args...)
	if len(msg) == 0 || msg[len(msg)-1] != '\n' {
		msg += "\n"
	}
	io.WriteString(o.stderr, msg)
}

// Verbosef is Logf for --verbose lines: after "gorun: " it writes the
// time of day to the microsecond, as the ranks' verbose lines carry it, so
// that the launcher's steps and the ranks' read as one timeline.
func (o *output) Verbosef(format string, args ...any) {
	o.Logf("%s "+format, append([]any{time.Now().Format(verboseTime)}, args...)...)
}

// verboseTime is the layout of Verbosef's time: log.Ltime|log.Lmicroseconds',
// which the ranks' loggers use.
const verboseTime = "15:04:05.000000"

// RankWriters returns the writers for one rank's stdout and stderr. Lines
// go to o; with dir set the bytes also go, unchanged, to dir/rank.N.out and
// dir/rank.N.err. Close flushes a last partial line and closes the files.
func (o *output) RankWriters(rank int, dir string) (stdout, stderr io.WriteCloser, err error) {
	stdout = o.lineWriter(rank, o.stdout)
	stderr = o.lineWriter(rank, o.stderr)
	if dir == "" {
		return stdout, stderr, nil
	}
	base := filepath.Join(dir, "rank."+strconv.Itoa(rank))
	fo, err := os.Create(base + ".out")
	if err != nil {
		return nil, nil, fmt.Errorf("output dir: %w", err)
	}
	fe, err := os.Create(base + ".err")
	if err != nil {
		fo.Close()
		return nil, nil, fmt.Errorf("output dir: %w", err)
	}
	return &tee{file: fo, lines: stdout, out: o, what: "stdout"}, &tee{file: fe, lines: stderr, out: o, what: "stderr"}, nil
}

func (o *output) lineWriter(rank int, dst *stream) *lineWriter {
	max := o.MaxLine
	if max <= 0 {
		max = defaultMaxLine
	}
	pause := o.PartialAfter
	if pause <= 0 {
		pause = partialAfter
	}
	return &lineWriter{out: o, dst: dst, rank: rank, max: max, pause: pause}
}

// prefix is what begins each line of rank: its time and "[rank] ", as
// asked; "" for neither.
func (o *output) prefix(rank int) string {
	if !o.Timestamp && !o.Tag {
		return ""
	}
	var b strings.Builder
	if o.Timestamp {
		now := time.Now
		if o.Now != nil {
			now = o.Now
		}
		b.WriteString(now().Format(timestampLayout))
		b.WriteByte(' ')
	}
	if o.Tag {
		b.WriteByte('[')
		b.WriteString(strconv.Itoa(rank))
		b.WriteString("] ")
	}
	return b.String()
}

// partialAfter is how long a partial line waits for its newline before
// lineWriter forwards what it has: a prompt ("Enter a value: "), a
// progress bar redrawn with \r, a Python REPL's ">>> " show after this
// pause, as mpirun shows them at once. Output that keeps coming is still
// forwarded a whole line at a time.
const partialAfter = 100 * time.Millisecond

// lineWriter holds back a partial line until its newline arrives, until it
// is max bytes long, or until it has waited partialAfter (then the line's
// first piece carries its prefix and the rest follows it as it comes, in
// pieces that go on the line, unless another rank's output came between:
// stream.piece).
// Write is for one goroutine; the pause's timer runs beside it.
type lineWriter struct {
	out   *output
	dst   *stream
	rank  int
	max   int
	pause time.Duration // partialAfter

	mu     sync.Mutex
	buf    []byte      // the partial line held back, shorter than max
	timer  *time.Timer // forwards buf after partialAfter; nil: none armed
	armed  int         // counts the timers armed, so that a stale one does nothing
	closed bool
}

func (w *lineWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(p)
	for len(p) > 0 {
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			room := w.max - len(w.buf)
			if len(p) < room {
				w.buf = append(w.buf, p...)
				break
			}
			w.emit(p[:room])
			p = p[room:]
			continue
		}
		if len(w.buf)+i > w.max {
			room := w.max - len(w.buf)
			w.emit(p[:room])
			p = p[room:]
			continue
		}
		w.emit(p[:i])
		p = p[i+1:]
	}
	if len(w.buf) > 0 && w.timer == nil && !w.closed {
		w.armed++
		armed := w.armed
		w.timer = time.AfterFunc(w.pause, func() { w.flushPartial(armed) })
	}
	return n, nil
}

// emit forwards the held-back bytes followed by p as the end of a line.
func (w *lineWriter) emit(p []byte) {
	if len(w.buf) > 0 {
		p = append(w.buf, p...)
	}
	w.dst.piece(w.out, w, p, true)
	w.buf = w.buf[:0]
	w.disarm()
}

// disarm stops the pause's timer: the line it waited on has ended.
func (w *lineWriter) disarm() {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
}

// flushPartial forwards the partial line that waited partialAfter since
// timer number armed was set.
func (w *lineWriter) flushPartial(armed int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if armed != w.armed || w.timer == nil {
		return // a stale timer: its line ended, another may be waiting
	}
	w.timer = nil
	if len(w.buf) == 0 || w.closed {
		return
	}
	w.dst.piece(w.out, w, w.buf, false)
	w.buf = w.buf[:0]
}

// Close forwards a last partial line, ending it with a newline.
func (w *lineWriter) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.disarm()
	w.closed = true
	if len(w.buf) > 0 || w.dst.isOpen(w) {
		w.emit(nil)
	}
	return nil
}
