//go:build linux

package delayline

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// TestRing: packets of every size leave the ring in order and unchanged
// across many wraps, and reserve says full rather than overwrite a packet
// still queued.
func TestRing(t *testing.T) {
	r := newRing(0) // the smallest: four packets of maxPacket bytes
	rnd := rand.New(rand.NewPCG(1, 2))
	bytesOf := rand.NewChaCha8([32]byte{3})
	var want [][]byte // queued, oldest first
	var seq int64
	for step := range 20000 {
		if rnd.IntN(2) == 0 {
			buf := r.reserve()
			if buf == nil {
				if len(want) == 0 {
					t.Fatalf("step %d: reserve found an empty ring full", step)
				}
				continue
			}
			if len(buf) != maxPacket {
				t.Fatalf("step %d: reserve gave %d bytes, want %d", step, len(buf), maxPacket)
			}
			n := 1 + rnd.IntN(maxPacket)
			if rnd.IntN(4) > 0 {
				n = 1 + rnd.IntN(200) // mostly small, like acknowledgements
			}
			p := make([]byte, n)
			bytesOf.Read(p)
			copy(buf, p)
			seq++
			r.push(n, seq)
			want = append(want, p)
			continue
		}
		p, at, ok := r.head()
		if ok != (len(want) > 0) {
			t.Fatalf("step %d: head ok %v with %d queued", step, ok, len(want))
		}
		if !ok {
			continue
		}
		if wantAt := seq - int64(len(want)) + 1; at != wantAt {
			t.Fatalf("step %d: head due %d, want %d", step, at, wantAt)
		}
		if !bytes.Equal(p, want[0]) {
			t.Fatalf("step %d: head's %d bytes differ from the %d pushed", step, len(p), len(want[0]))
		}
		r.pop()
		want = want[1:]
		if r.len() != len(want) {
			t.Fatalf("step %d: len %d, want %d", step, r.len(), len(want))
		}
	}
}

// TestPacer: packets leave one after another at the rate and arrive the
// delay after; one that finds the backlog at the limit is dropped, and a
// link idle long enough starts afresh.
func TestPacer(t *testing.T) {
	const us = 1000
	p := pacer{nsPerByte: 8, delay: 100 * us, limit: 2500} // 1 Gbit/s: 1 us per 125 bytes
	steps := []struct {
		now, n int
		at     int64
		ok     bool
	}{
		{0, 1250, 10*us + 100*us, true},        // leaves at 10 us
		{0, 1250, 20*us + 100*us, true},        // after the first
		{5 * us, 1000, 0, false},               // backlog 15 us = 1875 bytes, + 1000 > 2500
		{5 * us, 625, 25*us + 100*us, true},    // 1875 + 625 = 2500 fits
		{500 * us, 125, 501*us + 100*us, true}, // idle: leaves 1 us after it came
	}
	for i, s := range steps {
		at, ok := p.due(int64(s.now), s.n)
		if ok != s.ok || (ok && at != s.at) {
			t.Errorf("packet %d (%d bytes at %d ns): due %d, %v; want %d, %v", i, s.n, s.now, at, ok, s.at, s.ok)
		}
	}
	unlimited := pacer{delay: 50 * us}
	if at, ok := unlimited.due(7, 65000); !ok || at != 7+50*us {
		t.Errorf("unlimited: due %d, %v; want %d, true", at, ok, 7+50*us)
	}
}

// TestShape: Validate rejects negative fields, and the default limit is
// 20 ms at the rate within its bounds.
func TestShape(t *testing.T) {
	for _, s := range []Shape{{Rate: -1}, {Delay: -1}, {Limit: -1}} {
		if err := s.Validate(); err == nil {
			t.Errorf("%+v: Validate passed", s)
		}
	}
	cases := []struct {
		s    Shape
		want int
	}{
		{Shape{Rate: 1e9}, 2_500_000},
		{Shape{Rate: 10e9}, 4 << 20},
		{Shape{Rate: 1e6}, 2 * maxPacket},
		{Shape{}, 4 << 20},
		{Shape{Rate: 1e9, Limit: 12345}, 12345},
	}
	for _, c := range cases {
		if got := c.s.limit(); got != c.want {
			t.Errorf("%+v: limit %d, want %d", c.s, got, c.want)
		}
	}
}
