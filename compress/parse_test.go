package compress

import (
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
