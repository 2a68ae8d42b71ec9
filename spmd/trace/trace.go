// Package trace is the one trace point that every send, receive and
// collective of a rank passes. It costs a nil check when profiling is off:
// a nil *Recorder ignores every call. With profiling on (gorun --profile DIR)
// each rank records its events in memory and writes them to
// DIR/rank.N.trace when its world closes; goprof reads those files.
//
// The file format is JSON lines: a header line, then one Event per line.
package trace

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Kind says what an event was.
type Kind uint8

// The kinds of event.
const (
	Send Kind = iota + 1
	Recv
	Collective
)

func (k Kind) String() string {
	switch k {
	case Send:
		return "send"
	case Recv:
		return "recv"
	case Collective:
		return "collective"
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Event is one traced operation. Times are nanoseconds since the
// recorder started.
type Event struct {
	Kind  Kind   `json:"k"`
	Name  string `json:"n,omitempty"` // collective name
	Comm  uint32 `json:"c"`
	Peer  int    `json:"p"` // world rank of the peer; -1 for collectives
	Tag   int32  `json:"t"`
	Bytes int    `json:"b"`
	Start int64  `json:"s"`
	End   int64  `json:"e,omitempty"`
}

// Header is the first line of a trace file.
type Header struct {
	Version int       `json:"version"`
	Rank    int       `json:"rank"`
	Size    int       `json:"size"`
	Host    string    `json:"host"`
	Start   time.Time `json:"start"`
}

// Recorder collects one rank's events. It is safe for concurrent use; a nil
// Recorder records nothing.
type Recorder struct {
	path  string
	hdr   Header
	start time.Time

	mu sync.Mutex
	// protects following
	events []Event
}

// New returns a recorder that will write dir/rank.N.trace.
func New(dir string, rank, size int, host string) (*Recorder, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("trace: %w", err)
	}
	now := time.Now()
	return &Recorder{
		path:  filepath.Join(dir, fmt.Sprintf("rank.%d.trace", rank)),
		hdr:   Header{Version: 1, Rank: rank, Size: size, Host: host, Start: now},
		start: now,
	}, nil
}

// Now returns the recorder's clock.
func (r *Recorder) Now() int64 {
	if r == nil {
		return 0
	}
	return int64(time.Since(r.start))
}

// Record adds e, stamping its start when unset.
func (r *Recorder) Record(e Event) {
	if r == nil {
		return
	}
	if e.Start == 0 {
		e.Start = r.Now()
	}
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
}

// Span records an operation of kind and name and returns the function that
// ends it: defer rec.Span(trace.Collective, "allreduce", id, n)().
func (r *Recorder) Span(k Kind, name string, comm uint32, bytes int) func() {
	if r == nil {
		return func() {}
	}
	start := r.Now()
	return func() {
		r.Record(Event{Kind: k, Name: name, Comm: comm, Peer: -1, Bytes: bytes, Start: start, End: r.Now()})
	}
}

// Close writes the trace file. It is idempotent in effect: later events are
// written by a later Close.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	events := r.events
	r.events = nil
	r.mu.Unlock()
	f, err := os.Create(r.path)
	if err != nil {
		return fmt.Errorf("trace: %w", err)
	}
	w := bufio.NewWriter(f)
	enc := json.NewEncoder(w)
	err = enc.Encode(r.hdr)
	for i := 0; err == nil && i < len(events); i++ {
		err = enc.Encode(events[i])
	}
	if ferr := w.Flush(); err == nil {
		err = ferr
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("trace: writing %s: %w", r.path, err)
	}
	return nil
}
