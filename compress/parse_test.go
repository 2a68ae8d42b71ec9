package compress

import (
	"regexp"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		spec, name, err string
	}{
		{spec: "", name: ""},
		{spec: "none", name: ""},
		{spec: "fp16", name: "fp16"},
		{spec: "bf16", name: "bf16"},
		{spec: "sign", name: "sign"},
		{spec: "topk:0.01", name: "topk:0.01"},
		{spec: "topk", name: "topk:0.01"},
		{spec: "randk:0.1", name: "randk:0.1"},
		{spec: "qsgd:16", name: "qsgd:16"},
		{spec: "powersgd:4", name: "powersgd:4"},
		{spec: "powersgd", name: "powersgd:4"},
		{spec: "fp16:2", err: "fp16 takes no parameter"},
		{spec: "topk:lots", err: "is not a number"},
		{spec: "topk:2", err: "topk"},
		{spec: "qsgd:2.5", err: "whole number"},
		{spec: "powersgd:0", err: "powersgd"},
		{spec: "gzip", err: "no codec of that name"},
		{spec: "topk:0.01+s2", name: "topk:0.01+s2"},
		{spec: "topk+", err: "no lossless stage after the +: pass +s2, +zstd or +auto"},
		{spec: "qsgd:8+", err: "no lossless stage after the +"},
		{spec: "topk+lz4", err: `lossless stage "lz4": want s2, zstd or auto`},
	} {
		c, err := Parse(tc.spec, 1)
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Parse(%q): %v, want an error saying %q", tc.spec, err, tc.err)
			}
		case err != nil:
			t.Errorf("Parse(%q): %v", tc.spec, err)
		case tc.name == "" && c != nil:
			t.Errorf("Parse(%q) = %s, want no codec", tc.spec, c.Name())
		case tc.name != "" && (c == nil || c.Name() != tc.name):
			t.Errorf("Parse(%q) = %v, want %s", tc.spec, c, tc.name)
		}
	}
}

// TestNamesDefaults: every "codec[:PARAM] (default D)" in Names is what
// Parse makes of the codec's bare name, so that the help texts built from
// Names say what "topk" alone means.
func TestNamesDefaults(t *testing.T) {
	found := regexp.MustCompile(`(\w+)\[:[A-Z]+\] \(default ([0-9.]+)\)`).FindAllStringSubmatch(Names, -1)
	if len(found) != 4 {
		t.Fatalf("Names gives %d defaults, want those of topk, randk, qsgd and powersgd:\n%s", len(found), Names)
	}
	for _, m := range found {
		bare, err := Parse(m[1], 1)
		if err != nil {
			t.Fatalf("Parse(%q): %v", m[1], err)
		}
		full, err := Parse(m[1]+":"+m[2], 1)
		if err != nil {
			t.Fatalf("Parse(%q): %v", m[1]+":"+m[2], err)
		}
		if bare.Name() != full.Name() {
			t.Errorf("Names says %s defaults to %s, but Parse(%q) is %s", m[1], m[2], m[1], bare.Name())
		}
	}
}
