package launch

import (
	"bytes"
	"io"
	"os"
	"sync"
	"testing"
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
		forwardStdin(bytes.NewReader(data), []*os.File{slowW, fastW, goneW}, 4<<20)
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

// TestForwardStdinBound: once a rank that does not read holds limit
// bytes, reading more of the input waits for it.
func TestForwardStdinBound(t *testing.T) {
	data := bytes.Repeat([]byte("x"), 4<<20)
	slowR, slowW, _ := os.Pipe()
	defer slowR.Close()
	src := &countingReader{r: bytes.NewReader(data)}
	go forwardStdin(src, []*os.File{slowW}, 256<<10)
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
