package launch

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"
)

// TestForwardStdinSlowRank: a rank that does not read does not hold back
// one that does, up to its buffer; a rank that has gone is dropped.
func TestForwardStdinSlowRank(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 1<<16) // 1 MiB
	slowR, slowW, _ := os.Pipe()
	fastR, fastW, _ := os.Pipe()
	goneR, goneW, _ := os.Pipe()
	goneR.Close() // a rank that exited
	defer slowR.Close()
	done := make(chan struct{})
	go func() {
		forwardStdin(bytes.NewReader(data), []*os.File{slowW, fastW, goneW}, 4<<20, t.Errorf)
		close(done)
	}()
	got, err := io.ReadAll(fastR) // ends when forwardStdin closes fastW
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the reading rank got %d bytes (%v), want %d while the other reads nothing", len(got), err, len(data))
	}
	<-done
	slow, _ := io.ReadAll(slowR)
	if !bytes.Equal(slow, data) {
		t.Errorf("the slow rank got %d bytes at last, want %d", len(slow), len(data))
	}
}

// TestForwardStdinReadError: a read error on gorun's input ends every
// rank's input after what was read, as its end would, and is said once.
// It was dropped without a word.
func TestForwardStdinReadError(t *testing.T) {
	r0, w0, _ := os.Pipe()
	r1, w1, _ := os.Pipe()
	defer r0.Close()
	defer r1.Close()
	src := io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(errors.New("read /dev/stdin: input/output error")))
	var said []string
	forwardStdin(src, []*os.File{w0, w1}, 1<<20, func(format string, args ...any) { said = append(said, fmt.Sprintf(format, args...)) })
	for i, r := range []*os.File{r0, r1} {
		if got, err := io.ReadAll(r); string(got) != "abc" || err != nil {
			t.Errorf("rank %d read %q, %v; want abc and its end", i, got, err)
		}
	}
	want := "reading standard input: read /dev/stdin: input/output error; the ranks' standard input ends there, as at end of file"
	if len(said) != 1 || said[0] != want {
		t.Errorf("said %q, want once %q", said, want)
	}
}

// TestForwardStdinBound: once a rank that does not read holds limit
// bytes, reading more of the input waits for it.
func TestForwardStdinBound(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 4<<20)
	slowR, slowW, _ := os.Pipe()
	defer slowR.Close()
	src := &countingReader{r: bytes.NewReader(data)}
	go forwardStdin(src, []*os.File{slowW}, 256<<10, t.Errorf)
	time.Sleep(200 * time.Millisecond) // let it fill the buffer and the pipe
	if n := src.n(); n > 2<<20 {
		t.Errorf("read %d bytes of input for a rank that reads nothing, want at most its buffer and a pipe's", n)
	}
	io.Copy(io.Discard, slowR)
}

type countingReader struct {
	r io.Reader

	mu sync.Mutex
	// protects following
	read int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.mu.Lock()
	c.read += n
	c.mu.Unlock()
	return n, err
}

func (c *countingReader) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read
}
