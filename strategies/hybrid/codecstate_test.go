package hybrid

import (
	"bytes"
	"testing"
)

// TestCodecBytes: codecFloats and codecBytes round-trip every length and
// byte value, trailing zeros and 0x80s included, and refuse a float that
// is not three bytes or bad padding.
func TestCodecBytes(t *testing.T) {
	for n := 0; n < 12; n++ {
		for _, fill := range []byte{0, 0x80, 0xff, 7} {
			b := bytes.Repeat([]byte{fill}, n)
			got, err := codecBytes(codecFloats(b))
			if err != nil || !bytes.Equal(got, b) {
				t.Errorf("%d bytes of %#x: got %x, %v", n, fill, got, err)
			}
		}
	}
	for _, f := range [][]float32{nil, {0}, {1 << 24}, {0.5}, {-1}, {0x80, 0}} {
		if _, err := codecBytes(f); err == nil {
			t.Errorf("codecBytes(%v) took it", f)
		}
	}
}
