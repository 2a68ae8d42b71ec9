package gossip

import (
	"errors"
	"strings"
	"testing"
)

func TestMetaRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name  string
		m     Member
		flags byte
	}{
		{"seed", Member{Rank: SeedRank, Hostname: "launcher", Pid: 7}, 0},
		{"rank", Member{Rank: 3, HostID: "h1", Hostname: "node1", Addr: "10.0.0.1:4000", Pid: 1 << 22}, 0},
		{"leaving", Member{Rank: 1 << 20, Addr: "[::1]:1"}, flagLeaving},
		{"longest", Member{Rank: 5, HostID: strings.Repeat("h", maxField), Hostname: strings.Repeat("n", maxField-20)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := encodeMeta(tc.m, tc.flags)
			if err != nil {
				t.Fatal(err)
			}
			m, flags, err := decodeMeta(b)
			if err != nil || m != tc.m || flags != tc.flags {
				t.Errorf("got %+v %#x %v, want %+v %#x", m, flags, err, tc.m, tc.flags)
			}
		})
	}
}

func TestMetaEncodeRefuses(t *testing.T) {
	for name, m := range map[string]Member{
		"rank below -1": {Rank: -2},
		"negative pid":  {Pid: -1},
		"long host id":  {HostID: strings.Repeat("x", maxField+1)},
		"not utf-8":     {Hostname: "\xff"},
		"too long":      {HostID: strings.Repeat("x", maxField), Hostname: strings.Repeat("y", maxField)},
	} {
		if _, err := encodeMeta(m, 0); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: got %v, want ErrConfig", name, err)
		}
	}
}

func TestCheckName(t *testing.T) {
	for _, tc := range []struct {
		name string
		rank int
		ok   bool
	}{
		{"r3", 3, true}, {"r03", 3, false}, {"r4", 3, false},
		{"seed-1a2b", SeedRank, true}, {"r0", SeedRank, false}, {"seed-x", 0, false},
	} {
		if err := checkName(tc.name, Member{Rank: tc.rank}); (err == nil) != tc.ok {
			t.Errorf("checkName(%q, rank %d) = %v", tc.name, tc.rank, err)
		}
	}
}

// FuzzMeta: metadata from the network never panics the decoder, and what
// decodes re-encodes to the same bytes.
func FuzzMeta(f *testing.F) {
	for _, m := range []Member{{Rank: SeedRank}, {Rank: 7, HostID: "h", Hostname: "n", Addr: "127.0.0.1:1", Pid: 9}} {
		b, _ := encodeMeta(m, 0)
		f.Add(b)
	}
	f.Add([]byte{metaVersion, 0, 0x80})
	f.Add([]byte{metaVersion, 0, 2, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, flags, err := decodeMeta(b)
		if err != nil {
			if !errors.Is(err, errMeta) {
				t.Fatalf("error %v does not wrap errMeta", err)
			}
			return
		}
		again, err := encodeMeta(m, flags)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", m, err)
		}
		if string(again) != string(b) {
			t.Fatalf("%x decodes to %+v, which encodes to %x", b, m, again)
		}
	})
}
