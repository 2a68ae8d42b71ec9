package kernel

import (
	"bytes"
	"testing"
)

// TestStream copies every length up to a few rounds of the vector loop,
// from every alignment of dst and src within 32 bytes, and checks that
// exactly the bytes copy would write are written: the head before dst's
// first 32-byte boundary, the non-temporal body and the tail.
func TestStream(t *testing.T) {
	const max = 3*128 + 70
	src := make([]byte, max+64)
	for i := range src {
		src[i] = byte(i*7 + 3)
	}
	dst := make([]byte, max+128)
	want := make([]byte, len(dst))
	for so := 0; so < 32; so += 5 {
		for do := 0; do < 32; do++ {
			for n := 0; n <= max; n += 1 + n/64 {
				for i := range dst {
					dst[i], want[i] = 0xee, 0xee
				}
				copy(want[do:do+n], src[so:so+n])
				got := StreamBytes(dst[do:do+n], src[so:so+n+7])
				if got != n || !bytes.Equal(dst, want) {
					t.Fatalf("src offset %d, dst offset %d, %d bytes: returned %d, dst differs from copy's", so, do, n, got)
				}
			}
		}
	}
}

// TestStreamTyped copies typed elements, with src shorter than dst.
func TestStreamTyped(t *testing.T) {
	src := make([]float64, 1000)
	for i := range src {
		src[i] = float64(i) + 0.5
	}
	dst := make([]float64, 1003)
	if n := Stream(dst[1:], src); n != 1000 {
		t.Fatalf("Stream returned %d, want 1000", n)
	}
	for i, v := range src {
		if dst[i+1] != v {
			t.Fatalf("dst[%d] = %v, want %v", i+1, dst[i+1], v)
		}
	}
	if dst[0] != 0 || dst[1001] != 0 || dst[1002] != 0 {
		t.Fatalf("Stream wrote outside the copy: %v %v %v", dst[0], dst[1001], dst[1002])
	}
	if Stream(dst, src[:0]) != 0 || Stream([]float64(nil), src) != 0 {
		t.Fatal("Stream of an empty slice copied something")
	}
}

// BenchmarkStream compares Stream with copy on 256 KiB, a Shared round.
//
//	go test -run '^$' -bench Stream ./prims/kernel
func BenchmarkStream(b *testing.B) {
	src, dst := make([]byte, 256<<10), make([]byte, 256<<10)
	b.Run("copy", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			copy(dst, src)
		}
	})
	b.Run("stream", func(b *testing.B) {
		b.SetBytes(int64(len(src)))
		for b.Loop() {
			StreamBytes(dst, src)
		}
	})
}
