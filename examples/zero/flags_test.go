package main

import (
	"flag"
	"strings"
	"testing"
)

// TestFlagMistakes: each mistake is an error that says what was wrong and
// what to pass, never a silent exit or a silent default.
func TestFlagMistakes(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--zero", "-2"}, "--zero -2: want 0, 1, 2 or 3"},
		{[]string{"--zero", "-1"}, "--zero -1: want 0, 1, 2 or 3"},
		{[]string{"--zero", "4"}, "--zero 4: want 0, 1, 2 or 3"},
		{[]string{"--zero", "1", "--shard", "full"}, "--zero 1 and --shard full both say what to shard"},
		{[]string{"--crash-in-save", "-1"}, "--crash-in-save -1"},
		{[]string{"--resume"}, "--resume needs --ckpt DIR"},
		{[]string{"--ckpt-every", "2"}, "--ckpt-every 2 needs --ckpt DIR"},
		{[]string{"--ddp", "--zero", "2"}, "--ddp with --zero 2: --ddp trains strategies/dp's DDP, for benchmarks, which takes none of"},
		{[]string{"--ddp", "--shard", "full"}, "--ddp with --shard full:"},
		{[]string{"--ddp", "--no-prefetch"}, "--ddp with --no-prefetch:"},
		{[]string{"--ddp", "--mixed", "bf16"}, "--ddp with --mixed bf16:"},
		{[]string{"--ddp", "--ckpt", "d", "--ckpt-every", "2"}, "--ddp with --ckpt d, --ckpt-every 2: "},
		{[]string{"--ddp", "--compress", "fp16"}, "--compress with --ddp"},
		{[]string{"--zero", "2", "--no-prefetch"}, "--no-prefetch applies to stage 3 only (it stops gathering a unit's parameters while the one before computes), not to stage 2: drop it, or pass --zero 3"},
		{[]string{"--shard", "grad-op", "--no-prefetch"}, "--no-prefetch applies to stage 3 only"},
	}
	for _, c := range cases {
		_, err := parseFlags(flag.NewFlagSet("zero", flag.ContinueOnError), c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	for _, ok := range [][]string{{"--ddp"}, {"--ddp", "--mixed", "none"}, {"--no-prefetch"}, {"--shard", "hybrid", "--no-prefetch"}, {"--zero", "3", "--no-prefetch"}} {
		if _, err := parseFlags(flag.NewFlagSet("zero", flag.ContinueOnError), ok); err != nil {
			t.Errorf("%v: %v", ok, err)
		}
	}
	if _, err := parseFlags(flag.NewFlagSet("zero", flag.ContinueOnError), []string{"--help"}); err != flag.ErrHelp {
		t.Errorf("--help: %v, want flag.ErrHelp (exit 0 after the usage)", err)
	}
}

// TestStage: with neither --zero nor --shard the stage is 3; each says
// the stage otherwise.
func TestStage(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int
	}{{nil, 3}, {[]string{"--zero", "0"}, 0}, {[]string{"--zero", "2"}, 2}, {[]string{"--shard", "grad-op"}, 2}} {
		cfg, err := parseFlags(flag.NewFlagSet("zero", flag.ContinueOnError), c.args)
		if err != nil || cfg.zero.Stage != c.want {
			t.Errorf("%v: stage %d, %v; want %d", c.args, cfg.zero.Stage, err, c.want)
		}
	}
}
