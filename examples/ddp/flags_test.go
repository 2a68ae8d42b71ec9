package main

import (
	"flag"
	"strings"
	"testing"
)

// TestFlagMistakes: each mistake is an error that says what was wrong and
// what to pass, never a silent exit.
func TestFlagMistakes(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--stepz", "3"}, "-stepz (--help lists the flags)"},
		{[]string{"--resume"}, "--resume needs --ckpt DIR"},
		{[]string{"--bucket-mb", "0"}, "--bucket-mb 0: want a positive size"},
		{[]string{"--ckpt-every", "-1"}, "--ckpt-every -1"},
		{[]string{"extra"}, `unexpected argument "extra"`},
		{[]string{"--ckpt-every", "2"}, "--ckpt-every 2 needs --ckpt DIR"},
		{[]string{"--local", "--compress", "topk"}, "--compress topk with --local: --local trains without a gradient reduction"},
		{[]string{"--compress", "topk+"}, "--compress: compress \"topk+\": no lossless stage after the +"},
	}
	for _, c := range cases {
		_, err := parseFlags(flag.NewFlagSet("ddp", flag.ContinueOnError), c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	if _, err := parseFlags(flag.NewFlagSet("ddp", flag.ContinueOnError), []string{"--help"}); err != flag.ErrHelp {
		t.Errorf("--help: %v, want flag.ErrHelp (exit 0 after the usage)", err)
	}
}
