package trace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Magic starts every trace file.
const Magic = "GORUNTRC"

// Version is the version of the file format this package writes.
const Version = 2

// Kind says what an event was.
type Kind uint8

// The kinds of event.
const (
	SendEvent       Kind = iota + 1 // a point-to-point send, from post to completion
	RecvEvent                       // a point-to-point receive, from post to completion
	WaitEvent                       // a wait for a non-blocking send or receive that blocked
	CollectiveEvent                 // a collective call, from entry to return
	RegionEvent                     // a region the program or a driver marked
	MemoryEvent                     // a sample of the Go heap in use (Bytes), at a region boundary
	numKinds
)

var kindNames = [...]string{SendEvent: "send", RecvEvent: "recv", WaitEvent: "wait", CollectiveEvent: "collective", RegionEvent: "region", MemoryEvent: "memory"}

func (k Kind) String() string {
	if k > 0 && k < numKinds {
		return kindNames[k]
	}
	return fmt.Sprintf("kind(%d)", uint8(k))
}

// Flags qualify an event.
type Flags uint8

// The flags.
const (
	// NonBlocking marks an Isend or Irecv (the rank did not wait in it;
	// its Wait is an event of its own), and a non-blocking collective,
	// which ran on its communicator's executor.
	NonBlocking Flags = 1 << iota
	// Failed marks an operation that returned an error.
	Failed
)

// Event is one recorded event, as the decoder returns it. Names are ids
// into the file's strings (File.Str). Times are nanoseconds on the rank's
// clock since the recorder started.
type Event struct {
	Start, End int64
	Bytes      int64  // bytes moved; for Memory, the heap in use
	Seq        uint64 // Collective: the call's index among the collectives on Comm
	Predicted  int64  // Collective: the time the cost model predicted (prims' costs, topo's constants), ns; 0 when unknown
	Comm       uint32 // communicator id (collectives: the communicator the program called)
	Peer       int32  // Send, Recv, Wait: the peer's world rank; else -1
	Tag        int32
	Name       uint32 // Collective: the operation; Region: its name; Wait: "send" or "recv"
	Algo       uint32 // Collective: the algorithm
	Site       uint32 // the call site: the first caller outside gorun's communication packages
	Track      uint32 // the thread of activity: "main", or a non-blocking executor's
	Kind       Kind
	Flags      Flags
}

// Dur returns the event's duration.
func (e *Event) Dur() int64 { return e.End - e.Start }

// Header is a trace file's first record.
type Header struct {
	Version int       `json:"version"`
	Rank    int       `json:"rank"`
	Size    int       `json:"size"`
	Job     string    `json:"job,omitempty"` // GORUN_JOB_ID: files of one job share it
	Host    string    `json:"host"`
	Pid     int       `json:"pid"`
	Start   time.Time `json:"start"` // wall clock at the recorder's time 0
	Program string    `json:"program,omitempty"`
	Restart int       `json:"restart,omitempty"` // GORUN_RESTART_COUNT: which start of a restarted job wrote it
}

// The record kinds of the file format.
const (
	recHeader byte = iota + 1
	recString
	recComm
	recClock
	recEvent
	recEnd
)

// Limits the decoder enforces, so that a corrupt length cannot make it
// allocate without bound.
const (
	maxRecord  = 1 << 20
	maxString  = 64 << 10 // the recorder cuts longer strings
	maxStrings = 1 << 24
	maxMembers = 1 << 20
)

// ErrCorrupt is wrapped by the decoder's errors about bytes that are not
// a trace file, or a damaged one.
var ErrCorrupt = errors.New("corrupt trace")

// ErrEmpty is wrapped by the decoder's error for a file of no bytes at
// all: the recorder writes the magic and the header as it opens a file,
// so an empty one was cut to nothing, or not written by a recorder.
var ErrEmpty = errors.New("empty trace file")

// ErrTruncated is wrapped by the decoder's error for a file that ends
// without its end record: the rank crashed, was killed, or is still
// running.
var ErrTruncated = errors.New("trace ends without its end record")

func appendUvarint(b []byte, v uint64) []byte { return binary.AppendUvarint(b, v) }
func appendVarint(b []byte, v int64) []byte   { return binary.AppendVarint(b, v) }

// appendRecord appends a record of kind k with payload p.
func appendRecord(b []byte, k byte, p []byte) []byte {
	b = append(b, k)
	b = appendUvarint(b, uint64(len(p)))
	return append(b, p...)
}
