package launch

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// The agent protocol. The launcher and an agent exchange frames over the
// agent's stdin (down) and stdout (up), which ssh or srun carry:
//
//	uint32 length of what follows (big endian)
//	byte   type
//	uint32 host: the index of the agent the frame is for or from
//	uint32 rank: the rank it is about, or 0
//	payload
//
// An agent first writes the line preamble; the launcher discards whatever a
// remote shell printed before it. Control payloads are JSON; output, stdin
// and signal payloads are raw bytes. Frames for hosts below an agent in the
// spawn tree pass through it unchanged, both ways.

// preamble is the line an agent writes before its first frame: its
// protocol's name and version. A launcher and an agent speak the same
// version or not at all: the launcher refuses an agent whose preamble names
// another (a gorun of another release on that host), saying so.
const (
	preamble        = preambleName + " " + protocolVersion
	preambleName    = "GORUN-AGENT"
	protocolVersion = "3"
)

// maxFrame bounds a frame's length; output comes in pieces of at most
// outputChunk bytes.
const (
	maxFrame    = 16 << 20
	outputChunk = 32 << 10
	frameHeader = 9 // type, host, rank
)

// maxJunk bounds what the launcher discards before the preamble.
const maxJunk = 1 << 20

// Frame types. Down: launcher to agent; up: agent to launcher.
const (
	frameSetup    byte = 1 + iota // down, JSON setupMsg: who the agent is, the job, its subtree
	frameStart                    // down, JSON startMsg: start one rank
	frameSignal                   // down, 4 bytes: signal number, for the rank
	frameStdin                    // down, bytes for the rank's stdin; empty: end of input
	frameHello                    // up, JSON helloMsg: the agent is up
	frameReady                    // up, JSON readyMsg: setup done, subtree being started
	frameStarted                  // up, 4 bytes: the rank's pid
	frameOutput                   // up, 1 byte stream (1 stdout, 2 stderr) and the bytes
	frameExited                   // up, JSON exitMsg: the rank ended
	frameLog                      // up, text: a line for gorun's log
	frameLost                     // up, text: the agent of host is lost, and why
	frameStdinAck                 // up, 4 bytes: how many bytes of stdin frames the rank's pipe took
	framePing                     // down, 4 bytes: a number the agent sends back in a pong
	framePong                     // up, 4 bytes: the number of the ping answered
	frameAlive                    // both ways, empty: the parent or child is there (keepalive); never relayed
	frameHold                     // down, empty: the launcher stops (Ctrl-Z) and sends nothing until it continues
	frameLast     = frameHold
)

// frame is one message of the agent protocol.
type frame struct {
	Type    byte
	Host    int
	Rank    int
	Payload []byte
}

// errFrame marks malformed frames.
var errFrame = errors.New("malformed agent frame")

// appendFrame appends the encoding of f to b.
func appendFrame(b []byte, f frame) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(frameHeader+len(f.Payload)))
	b = append(b, f.Type)
	b = binary.BigEndian.AppendUint32(b, uint32(f.Host))
	b = binary.BigEndian.AppendUint32(b, uint32(f.Rank))
	return append(b, f.Payload...)
}

// readFrame reads one frame. A clean end of input before a frame is io.EOF;
// anything malformed is an error matching errFrame.
func readFrame(r *bufio.Reader) (frame, error) {
	var hdr [4 + frameHeader]byte
	if _, err := io.ReadFull(r, hdr[:4]); err != nil {
		return frame{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < frameHeader || n > maxFrame {
		return frame{}, fmt.Errorf("%w: length %d", errFrame, n)
	}
	if _, err := io.ReadFull(r, hdr[4:]); err != nil {
		return frame{}, unexpected(err)
	}
	f := frame{
		Type: hdr[4],
		Host: int(binary.BigEndian.Uint32(hdr[5:9])),
		Rank: int(binary.BigEndian.Uint32(hdr[9:13])),
	}
	if f.Type < frameSetup || f.Type > frameLast {
		return frame{}, fmt.Errorf("%w: type %d", errFrame, f.Type)
	}
	if f.Host > maxHostIndex || f.Rank > maxHostIndex {
		return frame{}, fmt.Errorf("%w: host %d, rank %d", errFrame, f.Host, f.Rank)
	}
	f.Payload = make([]byte, n-frameHeader)
	if _, err := io.ReadFull(r, f.Payload); err != nil {
		return frame{}, unexpected(err)
	}
	return f, nil
}

// maxHostIndex bounds host indices and ranks in frames.
const maxHostIndex = 1 << 24

func unexpected(err error) error {
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return fmt.Errorf("%w: truncated", errFrame)
	}
	return err
}

// skipPreamble reads r up to and including the preamble line and returns
// what came before it (a remote shell's chatter).
func skipPreamble(r *bufio.Reader) (junk []byte, err error) {
	var buf bytes.Buffer
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			buf.Write(line)
		} else if err != nil {
			buf.Write(line)
			return buf.Bytes(), err
		} else if l := string(bytes.TrimRight(line, "\r\n")); l == preamble {
			return buf.Bytes(), nil
		} else if v, ok := strings.CutPrefix(l, preambleName+" "); ok {
			return buf.Bytes(), &protocolError{version: v}
		} else {
			buf.Write(line)
		}
		if buf.Len() > maxJunk {
			return buf.Bytes(), fmt.Errorf("more than %d bytes of output before the agent's preamble", maxJunk)
		}
	}
}

// protocolError is an agent that speaks another version of the protocol:
// the gorun on its host is another release.
type protocolError struct{ version string }

func (e *protocolError) Error() string {
	return fmt.Sprintf("the gorun agent there speaks protocol %q, this gorun %q: it is another release of gorun "+
		"(this one is %s); install this one there, at the same path, or add --preload to copy it for the job",
		e.version, protocolVersion, Version())
}

// Control messages, JSON in frame payloads.

// setupMsg tells an agent who it is and what the job is; the secret travels
// only here, inside ssh's encrypted stream.
type setupMsg struct {
	Name      string   // the host's entry in the host list
	Parent    string   // who started the agent: "" for the launcher
	JobID     string   `json:",omitempty"`
	Secret    []byte   `json:",omitempty"`
	Subtree   []target `json:",omitempty"` // hosts this agent starts agents on (and relays for)
	Remote    remote   // how to start them
	Radix     int
	Seed      string        `json:",omitempty"` // launcher's seed IP: the address to face
	Iface     string        `json:",omitempty"` // --iface
	Net       string        `json:",omitempty"` // --net
	Ports     string        `json:",omitempty"` // --ports
	KillGrace time.Duration `json:",omitempty"`
	Connect   time.Duration `json:",omitempty"` // connect timeout for its children
	// AgentTimeout: an agent that hears nothing from its parent for this
	// long stops its ranks and exits, and a parent gives up a child as
	// silent (watchdog.go); each sends the other a keepalive every
	// AgentTimeout/aliveBeats. 0: no limit, no keepalives.
	AgentTimeout time.Duration `json:",omitempty"`
	Verbose      bool          `json:",omitempty"`
	// PreloadDir is the directory that the agent's parent copied files
	// to on its host (gorun with --preload, the programs); "" none. The
	// parent stamps it; the agent copies it on to its children and
	// removes it at its end.
	PreloadDir string `json:",omitempty"`
}

// target is a host an agent is started on.
type target struct {
	Index int    // the host's index in the job: frames' host field
	Name  string // its entry in the host list
	Dest  string // what ssh connects to: [user@]addr
}

// startMsg starts one rank (the frame's rank).
type startMsg struct {
	Path string
	Args []string `json:",omitempty"`
	Dir  string   `json:",omitempty"`
	// DirSet: Dir is the user's --wdir, which must exist on the host;
	// else it is the launcher's directory, used where the host has it.
	DirSet bool     `json:",omitempty"`
	Env    []string // what gorun sets; the agent adds its own environment
	Stdin  bool     `json:",omitempty"` // stdin frames follow; else /dev/null
	// ShareProcs: the user chose no GOMAXPROCS; the agent gives the rank
	// its share of the host's CPUs (rankPlan.ShareProcs).
	ShareProcs bool `json:",omitempty"`
	// Preloaded is the program's name in the host's preload directory
	// (setupMsg.PreloadDir); "": run Path.
	Preloaded string `json:",omitempty"`
}

// helloMsg is an agent's first frame.
type helloMsg struct {
	Hostname string
	Pid      int
	Version  string `json:",omitempty"` // the agent's gorun build (Version)
	SSH      string `json:",omitempty"` // SSH_CONNECTION: client ip, port, server ip, port
	Via      string `json:",omitempty"` // the agent that relayed it, set by that agent
}

// readyMsg answers setup.
type readyMsg struct {
	BindAddr string // the address ranks on this host listen on
	CPUs     int    `json:",omitempty"` // the CPUs the agent may run on; 0: not said (an older agent)
	Cores    int    `json:",omitempty"` // the cores among them, as auto binds; 0: not said
	// Refused says why the agent will not start the host's ranks: an
	// --iface or --net that matches no address of the host. "": ready.
	Refused string `json:",omitempty"`
}

// exitMsg says how a rank ended.
type exitMsg struct {
	Code      int   `json:",omitempty"`
	Signal    int   `json:",omitempty"`
	LostPeers []int `json:",omitempty"` // status.LostPeers
	// StartErr: the rank could not be started, and why; Code is then
	// the status a shell gives (127 not found, 126 not executable) or
	// 2 for a usage error (a --wdir that is not on the host).
	StartErr string `json:",omitempty"`
}

// jsonFrame is a frame with a JSON payload.
func jsonFrame(typ byte, host, rank int, v any) frame {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // our own message types always marshal
	}
	return frame{Type: typ, Host: host, Rank: rank, Payload: b}
}

// decode unmarshals f's JSON payload into v.
func (f frame) decode(v any) error {
	if err := json.Unmarshal(f.Payload, v); err != nil {
		return fmt.Errorf("%w: type %d: %v", errFrame, f.Type, err)
	}
	return nil
}

// u32 decodes a 4-byte payload.
func (f frame) u32() (int, error) {
	if len(f.Payload) != 4 {
		return 0, fmt.Errorf("%w: type %d: payload of %d bytes, want 4", errFrame, f.Type, len(f.Payload))
	}
	return int(binary.BigEndian.Uint32(f.Payload)), nil
}

func u32Frame(typ byte, host, rank, v int) frame {
	return frame{Type: typ, Host: host, Rank: rank, Payload: binary.BigEndian.AppendUint32(nil, uint32(v))}
}
