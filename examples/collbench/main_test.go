package main

import (
	"flag"
	"slices"
	"strings"
	"testing"
)

func TestParseFlags(t *testing.T) {
	tests := []struct {
		name string
		args string
		err  string
	}{
		{"defaults", "", ""},
		{"all", "-b 1K -e 1M -f 4 -n 3 -w 0 -c 1 --op all --type uint8 --redop max", ""},
		{"two ops", "--op allreduce,broadcast", ""},
		{"bad op", "--op allreduc", `--op "allreduc"`},
		{"bad type", "--type float16", `--type "float16"`},
		{"bad redop", "--redop avg", `--redop "avg"`},
		{"min above max", "-b 1M -e 1K", "is larger than"},
		{"bad check", "-c 2", "-c 2"},
		{"bare check", "--op all -c", ""},
		{"bare check then flag", "-c -b 1K", ""},
		{"check off", "-c 0 -b 1K", ""},
		{"stray argument", "-b 1K 2K", `unexpected argument "2K"`},
		{"bad factor", "-f 1", "-f 1"},
		{"algo list", "--algo ring,shared,auto -r 3", ""},
		{"bad algo", "--algo ring,rnig", `--algo "ring,rnig"`},
		{"algo twice", "--algo auto,shared,auto", "auto is listed twice"},
		{"bad rounds", "-r 0", "-r 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := parseFlags(flag.NewFlagSet("collbench", flag.ContinueOnError), strings.Fields(tt.args))
			if (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("parseFlags(%s) error %v, want %q", tt.args, err, tt.err)
			}
			if tt.name == "defaults" && (cfg.minBytes != 8 || cfg.maxBytes != 64<<20 || cfg.factor != 2 || cfg.typ != "float32" || cfg.redop != "sum" || cfg.ops[0] != "allreduce") {
				t.Errorf("defaults: %+v", cfg)
			}
			if tt.name == "algo list" && (!slices.Equal(cfg.algos, []string{"ring", "shared", ""}) || cfg.rounds != 3) {
				t.Errorf("algo list: %+v", cfg)
			}
			if tt.name == "defaults" && (!slices.Equal(cfg.algos, []string{""}) || cfg.rounds != 1) {
				t.Errorf("defaults: %+v", cfg)
			}
			if strings.HasPrefix(tt.name, "bare check") && !cfg.check || tt.name == "check off" && cfg.check {
				t.Errorf("%s: check %v", tt.name, cfg.check)
			}
			if tt.name == "bare check then flag" && cfg.minBytes != 1024 {
				t.Errorf("-c -b 1K: -b %d", cfg.minBytes)
			}
			if tt.name == "all" && (len(cfg.ops) != len(opNames) || !cfg.check || cfg.minBytes != 1024) {
				t.Errorf("all: %+v", cfg)
			}
		})
	}
}
