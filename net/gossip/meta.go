package gossip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Member metadata travels in the memberlist node Meta, which is limited to
// memberlist.MetaMaxSize (512) bytes. The encoding is
//
//	version  byte (metaVersion)
//	flags    byte (flagLeaving)
//	rank     zig-zag varint (-1 for a seed)
//	pid      uvarint
//	HostID, Hostname, Addr: each a uvarint length then that many bytes
//
// Meta comes from the network and is untrusted: decodeMeta checks every
// length and value and never panics (FuzzMeta).

const (
	metaVersion = 1
	metaMax     = 512 // memberlist.MetaMaxSize
	maxField    = 255 // longest HostID, Hostname or Addr
)

// meta flags
const (
	flagLeaving = 1 << iota // the node is leaving gracefully (Close)
	flagsKnown  = flagLeaving
)

var errMeta = errors.New("gossip: bad member metadata")

// encodeMeta encodes m with flags. It fails when a field is too long or not
// UTF-8, so that a bad Member is refused before it reaches the network.
func encodeMeta(m Member, flags byte) ([]byte, error) {
	if m.Rank < SeedRank || m.Pid < 0 {
		return nil, fmt.Errorf("%w: rank %d, pid %d: want rank >= -1 and pid >= 0", ErrConfig, m.Rank, m.Pid)
	}
	b := make([]byte, 0, 32+len(m.HostID)+len(m.Hostname)+len(m.Addr))
	b = append(b, metaVersion, flags)
	b = binary.AppendVarint(b, int64(m.Rank))
	b = binary.AppendUvarint(b, uint64(m.Pid))
	for _, f := range []struct{ name, s string }{{"HostID", m.HostID}, {"Hostname", m.Hostname}, {"Addr", m.Addr}} {
		if len(f.s) > maxField || !utf8.ValidString(f.s) {
			return nil, fmt.Errorf("%w: Member.%s %.40q: want UTF-8 of at most %d bytes", ErrConfig, f.name, f.s, maxField)
		}
		b = binary.AppendUvarint(b, uint64(len(f.s)))
		b = append(b, f.s...)
	}
	if len(b) > metaMax {
		return nil, fmt.Errorf("%w: member metadata is %d bytes, memberlist allows %d", ErrConfig, len(b), metaMax)
	}
	return b, nil
}

// decodeMeta is the inverse of encodeMeta. Every error wraps errMeta.
func decodeMeta(b []byte) (Member, byte, error) {
	var m Member
	if len(b) > metaMax {
		return m, 0, fmt.Errorf("%w: %d bytes, limit %d", errMeta, len(b), metaMax)
	}
	if len(b) < 2 || b[0] != metaVersion {
		return m, 0, fmt.Errorf("%w: not version %d", errMeta, metaVersion)
	}
	flags := b[1]
	if flags&^flagsKnown != 0 {
		return m, 0, fmt.Errorf("%w: unknown flags %#x", errMeta, flags)
	}
	b = b[2:]
	rank, n := binary.Varint(b)
	if n <= 0 || n != varintLen(rank) || rank < SeedRank || rank > 1<<30 {
		return m, 0, fmt.Errorf("%w: bad rank", errMeta)
	}
	b = b[n:]
	pid, n := binary.Uvarint(b)
	if n <= 0 || n != uvarintLen(pid) || pid > 1<<31-1 {
		return m, 0, fmt.Errorf("%w: bad pid", errMeta)
	}
	b = b[n:]
	m.Rank, m.Pid = int(rank), int(pid)
	for _, dst := range []*string{&m.HostID, &m.Hostname, &m.Addr} {
		l, n := binary.Uvarint(b)
		if n <= 0 || n != uvarintLen(l) || l > maxField || l > uint64(len(b)-n) {
			return Member{}, 0, fmt.Errorf("%w: bad string length", errMeta)
		}
		s := b[n : n+int(l)]
		if !utf8.Valid(s) {
			return Member{}, 0, fmt.Errorf("%w: string is not UTF-8", errMeta)
		}
		*dst = string(s)
		b = b[n+int(l):]
	}
	if len(b) != 0 {
		return Member{}, 0, fmt.Errorf("%w: %d trailing bytes", errMeta, len(b))
	}
	return m, flags, nil
}

// varintLen and uvarintLen are the lengths of the shortest encodings:
// decodeMeta refuses longer ones, so that each Member has one encoding.
func varintLen(v int64) int   { return len(binary.AppendVarint(nil, v)) }
func uvarintLen(v uint64) int { return len(binary.AppendUvarint(nil, v)) }

// nodeName is the memberlist node name of a rank: "r3".
func nodeName(rank int) string { return "r" + strconv.Itoa(rank) }

// seedPrefix starts the memberlist node name of every seed ("seed-1a2b3c4d");
// several seeds of one job need distinct names.
const seedPrefix = "seed-"

// checkName reports whether a node called name may carry metadata of m:
// ranks must be called nodeName(rank), seeds seedPrefix and anything.
func checkName(name string, m Member) error {
	if m.Rank == SeedRank {
		if !strings.HasPrefix(name, seedPrefix) {
			return fmt.Errorf("%w: node %q claims to be a seed", errMeta, name)
		}
		return nil
	}
	if name != nodeName(m.Rank) {
		return fmt.Errorf("%w: node %q claims rank %d", errMeta, name, m.Rank)
	}
	return nil
}
