package rendezvous

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"
)

// Record is what a rank tells the job about itself.
type Record struct {
	Rank     int
	HostID   string // host identity (topo groups ranks by it)
	Hostname string
	Addr     string // the rank's data-plane address "ip:port"
	Gossip   string // the rank's gossip address, "" when it gossips not
	Pid      int

	wait time.Duration // (server) how long the rank waits from its registration
}

var (
	// ErrTimeout is matched (errors.Is) by the *MissingError of a Register
	// whose ctx's deadline passed before every rank registered (one whose
	// ctx was cancelled wraps context.Canceled instead).
	ErrTimeout = errors.New("rendezvous: timed out waiting for ranks")
	// ErrRefused is wrapped when the server refused the rank: another job,
	// a wrong secret, a different size, or a rank registered twice.
	ErrRefused = errors.New("rendezvous: refused")
	// ErrClosed is returned by a closed Server's Wait.
	ErrClosed = errors.New("rendezvous: closed")
)

// MissingError is a Register's error when its ctx ended first: it names
// the ranks the server had not heard from (every waiting rank names the
// same ones), or says that the server could not be reached.
type MissingError struct {
	Missing []int         // ranks that never registered, ascending; nil if unknown
	Size    int           // ranks in the job
	Waited  time.Duration // how long the rank waited
	Reach   error         // why the server could not be reached or asked, or nil
	Err     error         // ctx.Err()
}

func (e *MissingError) Error() string {
	var b strings.Builder
	switch {
	case e.stopped() && e.Missing != nil:
		fmt.Fprintf(&b, "stopped after %v while waiting for %s of %d", e.Waited, contract.RankList(e.Missing), e.Size)
	case e.stopped():
		fmt.Fprintf(&b, "stopped after %v while waiting for the other ranks of %d", e.Waited, e.Size)
	case e.Missing != nil:
		b.WriteString(contract.RankList(e.Missing))
		fmt.Fprintf(&b, " of %d never arrived within %v", e.Size, e.Waited)
	default:
		fmt.Fprintf(&b, "the other ranks of %d did not all arrive within %v", e.Size, e.Waited)
	}
	if e.Reach != nil {
		fmt.Fprintf(&b, "; %v", e.Reach)
	}
	return b.String()
}

// stopped says that the wait was cancelled (the job stopped: a signal, a
// peer's failure) before its deadline.
func (e *MissingError) stopped() bool { return errors.Is(e.Err, context.Canceled) }

// Is makes errors.Is(err, ErrTimeout) hold for a wait that ran to its
// deadline, not for one cancelled before it.
func (e *MissingError) Is(target error) bool { return target == ErrTimeout && !e.stopped() }

// Unwrap returns the context's error and the reaching error.
func (e *MissingError) Unwrap() []error { return []error{e.Err, e.Reach} }

// The protocol. A rank sends magic, the job id and the size; the server a
// nonce; the rank the MAC and its record. Then the server sends messages,
// a kind byte and a 4-byte length before each payload: msgTable ends the
// exchange, msgMissing answers the rank's ask byte, msgError ends it.
const (
	magic      = "GRV1"
	nonceLen   = 16
	msgTable   = 'T'
	msgMissing = 'M'
	msgError   = 'E'
	askMissing = 'S'
	// maxString bounds each string of a record, maxRanks the size, and
	// maxMessage a message: a peer's lengths are not trusted.
	maxString  = 1 << 10
	maxRanks   = 1 << 22
	maxMessage = 1 << 30
)

// mac is the proof that a rank has the job's secret.
func mac(secret []byte, jobID string, nonce []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte("gorun rendezvous\x00"))
	h.Write([]byte(jobID))
	h.Write([]byte{0})
	h.Write(nonce)
	return h.Sum(nil)
}

// encoder appends uvarints and strings.
type encoder struct{ b []byte }

func (e *encoder) uint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) str(s string)  { e.uint(uint64(len(s))); e.b = append(e.b, s...) }
func (e *encoder) record(r Record) {
	e.uint(uint64(r.Rank))
	e.str(r.HostID)
	e.str(r.Hostname)
	e.str(r.Addr)
	e.str(r.Gossip)
	e.uint(uint64(r.Pid))
}

// decoder reads what encoder wrote, keeping the first error.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf(format, args...)
	}
}

func (d *decoder) uint(max uint64) uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 || v > max {
		d.fail("a number out of range")
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) str() string {
	n := d.uint(maxString)
	if d.err != nil {
		return ""
	}
	if uint64(len(d.b)) < n {
		d.fail("a string past the end")
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

func (d *decoder) record(size int) Record {
	r := Record{Rank: int(d.uint(uint64(max(size-1, 0))))}
	r.HostID, r.Hostname, r.Addr, r.Gossip = d.str(), d.str(), d.str(), d.str()
	r.Pid = int(d.uint(math.MaxInt32))
	return r
}

// encodeTable writes the table with each host's id and name once: a rank
// costs its host's index, its addresses and its pid.
func encodeTable(recs []Record) []byte {
	var e encoder
	type host struct{ id, name string }
	index := map[host]int{}
	var hosts []host
	for _, r := range recs {
		h := host{r.HostID, r.Hostname}
		if _, ok := index[h]; !ok {
			index[h] = len(hosts)
			hosts = append(hosts, h)
		}
	}
	e.uint(uint64(len(hosts)))
	for _, h := range hosts {
		e.str(h.id)
		e.str(h.name)
	}
	e.uint(uint64(len(recs)))
	for _, r := range recs {
		e.uint(uint64(index[host{r.HostID, r.Hostname}]))
		e.str(r.Addr)
		e.str(r.Gossip)
		e.uint(uint64(r.Pid))
	}
	return e.b
}

// decodeTable reads a table of size ranks, rank i the i-th.
func decodeTable(b []byte, size int) ([]Record, error) {
	d := decoder{b: b}
	nh := int(d.uint(uint64(size)))
	type host struct{ id, name string }
	hosts := make([]host, 0, nh)
	for range nh {
		if d.err != nil {
			break
		}
		hosts = append(hosts, host{d.str(), d.str()})
	}
	if n := int(d.uint(maxRanks)); d.err == nil && n != size {
		d.fail("a table of %d ranks, want %d", n, size)
	}
	recs := make([]Record, 0, size)
	for i := 0; i < size && d.err == nil; i++ {
		h := int(d.uint(uint64(max(nh-1, 0))))
		r := Record{Rank: i, Addr: d.str(), Gossip: d.str(), Pid: int(d.uint(math.MaxInt32))}
		if d.err == nil {
			r.HostID, r.Hostname = hosts[h].id, hosts[h].name
		}
		recs = append(recs, r)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d bytes after the table", len(d.b))
	}
	if d.err != nil {
		return nil, fmt.Errorf("rendezvous: a corrupt table: %w", d.err)
	}
	return recs, nil
}

func encodeRanks(rs []int) []byte {
	var e encoder
	e.uint(uint64(len(rs)))
	for _, r := range rs {
		e.uint(uint64(r))
	}
	return e.b
}

func decodeRanks(b []byte, size int) ([]int, error) {
	d := decoder{b: b}
	n := int(d.uint(uint64(size)))
	rs := make([]int, 0, n)
	for range n {
		rs = append(rs, int(d.uint(uint64(max(size-1, 0)))))
	}
	if d.err != nil {
		return nil, fmt.Errorf("rendezvous: a corrupt answer: %w", d.err)
	}
	return rs, nil
}

// writeMsg writes one server message.
func writeMsg(w io.Writer, kind byte, payload []byte) error {
	var h [5]byte
	h[0] = kind
	binary.BigEndian.PutUint32(h[1:], uint32(len(payload)))
	if _, err := w.Write(h[:]); err != nil {
		return err
	}
	_, err := w.Write(payload)
	return err
}

// readMsg reads one server message.
func readMsg(r *bufio.Reader) (byte, []byte, error) {
	var h [5]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(h[1:])
	if n > maxMessage {
		return 0, nil, fmt.Errorf("rendezvous: a message of %d bytes", n)
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return 0, nil, err
	}
	return h[0], b, nil
}

// newNonce returns nonceLen random bytes.
func newNonce() []byte {
	b := make([]byte, nonceLen)
	_, _ = rand.Read(b)
	return b
}
