package shm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"testing"
	"unsafe"

	"github.com/gorun-hpc/gorun/spmd/transport"
)

// testRing returns a ring of size bytes over ordinary memory.
func testRing(size int) ring {
	mem := make([]uint64, (ctlSize+size)/8)
	c := (*ctl)(unsafe.Pointer(&mem[0]))
	data := unsafe.Slice((*byte)(unsafe.Pointer(&mem[ctlSize/8])), size)
	return newRing(c, data)
}

// collector is a Handler that gives each message a fresh buffer (refusing
// absurd lengths, as a corrupt header may announce) and records deliveries.
type collector struct {
	msgs    []msg
	buffers int
}

type msg struct {
	peer int
	h    transport.Header
	data []byte
}

func (c *collector) Buffer(_ int, h transport.Header) []byte {
	c.buffers++
	if h.Len > 1<<20 {
		return nil
	}
	return make([]byte, h.Len)
}

func (c *collector) Deliver(peer int, h transport.Header, p []byte) {
	c.msgs = append(c.msgs, msg{peer, h, p})
}

func (c *collector) Lost(int, error) {}

// arrivals is a collector that takes whole messages too
// (transport.Arriver), copying them out of the ring as the engine does.
type arrivals struct {
	*collector
	n int
}

func (a *arrivals) Arrive(peer int, h transport.Header, x, y []byte) {
	a.n++
	a.msgs = append(a.msgs, msg{peer, h, append(append([]byte{}, x...), y...)})
}

// content is the payload of message i of n bytes.
func content(i, n int) []byte {
	b := make([]byte, n)
	for j := range b {
		b[j] = byte(i*131 + j*7 + j>>8)
	}
	return b
}

// pump sends messages of the given sizes through a ring of ringSize bytes,
// interleaving producer steps and consumer polls as the schedule bytes say,
// and checks that they arrive intact and in order, through Buffer and
// Deliver and, with arrive, through an Arriver for those written whole.
func pump(t *testing.T, ringSize int, sizes []int, schedule []byte, arrive bool) {
	r := testRing(ringSize)
	p := producer{r: r}
	c := consumer{r: r, peer: 3}
	var got collector
	ar := &arrivals{collector: &got}
	if arrive {
		c.arriver = ar
	}
	sent := 0
	produce := func() bool {
		if sent == len(sizes) {
			return false
		}
		if !p.busy() {
			h := transport.Header{Comm: uint32(sent), Tag: int32(-sent), Len: sizes[sent]}
			p.begin(h, content(sent, sizes[sent]))
		}
		wrote, done, err := p.step()
		if err != nil {
			t.Fatalf("producer: %v", err)
		}
		if done {
			sent++
		}
		return wrote
	}
	consume := func() bool {
		n, err := c.poll(&got)
		if err != nil {
			t.Fatalf("consumer: %v", err)
		}
		return n > 0
	}
	for step := 0; len(got.msgs) < len(sizes); step++ {
		first, second := produce, consume
		if len(schedule) > 0 && schedule[step%len(schedule)]&1 == 1 {
			first, second = consume, produce
		}
		if !first() && !second() {
			t.Fatalf("stalled after %d of %d messages sent, %d delivered", sent, len(sizes), len(got.msgs))
		}
	}
	for i, m := range got.msgs {
		want := transport.Header{Comm: uint32(i), Tag: int32(-i), Len: sizes[i]}
		if m.peer != 3 || m.h != want || !bytes.Equal(m.data, content(i, sizes[i])) {
			t.Fatalf("message %d: got peer %d %+v (%d bytes), want %+v", i, m.peer, m.h, len(m.data), want)
		}
	}
	if !arrive && ar.n > 0 || ar.n+got.buffers != len(sizes) {
		t.Fatalf("%d messages arrived whole and %d through Buffer, of %d (arriver %v)", ar.n, got.buffers, len(sizes), arrive)
	}
}

func TestRingFraming(t *testing.T) {
	for _, c := range []struct {
		name  string
		ring  int
		sizes []int
	}{
		{"empty messages", 64, []int{0, 0, 0, 0, 0, 0, 0}},
		{"wraparound", 64, []int{5, 17, 3, 30, 1, 9, 40, 2}},
		{"exactly the ring", 128, []int{128 - frameHeaderSize, 128 - frameHeaderSize, 7}},
		{"far larger than the ring", 64, []int{1000, 0, 4096, 3}},
		{"large ring, mixed", 4096, []int{1, 100 << 10, 8, 4096, 0, 5000}},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, arrive := range []bool{false, true} {
				pump(t, c.ring, c.sizes, []byte{0, 1, 1, 0, 0, 1}, arrive)
				pump(t, c.ring, c.sizes, nil, arrive)
			}
		})
	}
}

// FuzzRing sends arbitrary sequences of message sizes through a small ring
// under an arbitrary interleaving of the two sides.
func FuzzRing(f *testing.F) {
	f.Add(byte(0), []byte{1, 0, 0, 10, 0, 200}, []byte{0, 1})
	f.Add(byte(2), []byte{0, 0, 255, 3, 40, 1}, []byte{1, 1, 0})
	f.Fuzz(func(t *testing.T, shift byte, sizeBytes, schedule []byte) {
		ringSize := 64 << (shift % 4)
		var sizes []int
		for i := 0; i+1 < len(sizeBytes) && len(sizes) < 64; i += 2 {
			sizes = append(sizes, int(binary.LittleEndian.Uint16(sizeBytes[i:]))%(3*ringSize+1))
		}
		pump(t, ringSize, sizes, schedule, shift&4 != 0)
	})
}

// FuzzRingCorrupt fills a ring with arbitrary bytes and positions: the
// consumer must report corruption or deliver, never panic or overrun,
// through Buffer and Deliver and (for raw of odd length) an Arriver.
func FuzzRingCorrupt(f *testing.F) {
	good := make([]byte, 64)
	putHeader(good, transport.Header{Tag: 1, Len: 8}, 0)
	f.Add(good, uint64(32), uint64(0))
	single := make([]byte, 64)
	putHeader(single, transport.Header{Tag: 1, Len: 1 << 20}, flagSingleCopy)
	f.Add(single, uint64(frameHeaderSize+descSize), uint64(0))
	f.Add(good, uint64(1<<40), uint64(7))
	bad := bytes.Clone(good)
	bad[20] = 0xff // a length far above MaxPayload
	f.Add(bad, uint64(30), uint64(0))
	whole := make([]byte, 65) // an odd length: taken by an Arriver
	putHeader(whole, transport.Header{Tag: 1, Len: 30}, flagWhole)
	f.Add(whole, uint64(0), uint64(0))
	f.Fuzz(func(t *testing.T, raw []byte, tail, head uint64) {
		r := testRing(64)
		copy(r.data, raw)
		r.c.tail.Store(tail)
		c := consumer{r: r, head: head}
		var got collector
		if len(raw)%2 == 1 {
			c.arriver = &arrivals{collector: &got}
		}
		for range 4 {
			if _, err := c.poll(&got); err != nil {
				return
			}
		}
		for _, m := range got.msgs {
			if len(m.data) != m.h.Len {
				t.Fatalf("delivered %d bytes for %+v", len(m.data), m.h)
			}
		}
	})
}

func TestParseHeaderRejects(t *testing.T) {
	valid := func() []byte {
		b := make([]byte, frameHeaderSize)
		putHeader(b, transport.Header{Len: 1}, 0)
		return b
	}
	for _, c := range []struct {
		name string
		edit func([]byte)
	}{
		{"magic", func(b []byte) { b[0] = 'x' }},
		{"version", func(b []byte) { b[3] = 1 }},
		{"flags", func(b []byte) { b[4] = 4 }},
		{"length", func(b []byte) { binary.LittleEndian.PutUint64(b[16:], MaxPayload+1) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			b := valid()
			c.edit(b)
			if _, _, err := parseHeader(b); !errors.Is(err, errCorrupt) {
				t.Fatalf("parseHeader = %v, want errCorrupt", err)
			}
		})
	}
}

func TestUsedRejectsImpossiblePositions(t *testing.T) {
	r := testRing(64)
	for _, c := range []struct{ tail, head uint64 }{{65, 0}, {0, 1}, {1 << 63, 5}} {
		if _, err := r.used(c.tail, c.head); !errors.Is(err, errCorrupt) {
			t.Errorf("used(%d, %d) = %v, want errCorrupt", c.tail, c.head, err)
		}
	}
}
