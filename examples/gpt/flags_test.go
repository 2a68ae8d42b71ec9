package main

import (
	"flag"
	"strings"
	"testing"
)

// TestFlagMistakes: each mistake is an error that names the flag as typed
// and says what to pass, before the job starts.
func TestFlagMistakes(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--lr", "-1"}, "--lr -1: want a positive rate"},
		{[]string{"--steps", "0"}, "--steps 0: pass 1 or more"},
		{[]string{"--embd", "0"}, "--embd 0: pass a width of 1 or more"},
		{[]string{"--embd", "130"}, "--embd 130 does not divide into --heads 4"},
		{[]string{"--block", "0"}, "--block 0: pass a context of 1 token or more"},
		{[]string{"--layers", "0"}, "--layers 0"},
		{[]string{"--zero", "4"}, "--zero 4: want 0, 1, 2 or 3"},
		{[]string{"--virtual", "0"}, "--virtual 0: pass 1 or more"},
		{[]string{"--tp", "0"}, "--tp 0: pass 1 or more"},
		{[]string{"--dp", "-1"}, "--dp -1"},
		{[]string{"--microbatches", "0"}, "--microbatches 0"},
		{[]string{"--dropout", "1"}, "--dropout 1"},
		{[]string{"--batch", "0"}, "--batch 0: pass at least 1"},
		{[]string{"--resume"}, "--resume needs --ckpt DIR"},
		{[]string{"--ckpt-every", "-1"}, "--ckpt-every -1: want 0 or more"},
	}
	for _, c := range cases {
		_, err := parseFlags(flag.NewFlagSet("gpt", flag.ContinueOnError), c.args)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want an error saying %q", c.args, err, c.want)
		}
	}
	if _, err := parseFlags(flag.NewFlagSet("gpt", flag.ContinueOnError), []string{"--help"}); err != flag.ErrHelp {
		t.Errorf("--help: %v, want flag.ErrHelp (exit 0 after the usage)", err)
	}
}

// TestShapeFlagNames: --dim and --context, examples/ddp's and zero's names
// for the GPT's width and context, set --embd and --block.
func TestShapeFlagNames(t *testing.T) {
	c, err := parseFlags(flag.NewFlagSet("gpt", flag.ContinueOnError), []string{"--dim", "64", "--context", "32"})
	if err != nil || c.embd != 64 || c.block != 32 {
		t.Errorf("--dim 64 --context 32: embd %d, block %d, %v; want 64 and 32", c.embd, c.block, err)
	}
}

// TestCheckMesh: a mesh that does not fit the job names the flags and the
// number of ranks.
func TestCheckMesh(t *testing.T) {
	for _, tc := range []struct {
		args []string
		size int
		want string // "" for none
	}{
		{[]string{"--tp", "2"}, 3, "3 ranks are not a multiple of --tp 2 x --pp 1 = 2"},
		{[]string{"--tp", "2", "--pp", "2", "--dp", "2"}, 4, "--tp 2 x --pp 2 x --dp 2 = 8, but the job has 4 ranks"},
		{[]string{"--tp", "2"}, 1, "1 rank is not a multiple of --tp 2 x --pp 1 = 2"},
		{[]string{"--tp", "2", "--pp", "2"}, 8, ""},
		{[]string{"--dp", "2"}, 2, ""},
	} {
		c, err := parseFlags(flag.NewFlagSet("gpt", flag.ContinueOnError), tc.args)
		if err != nil {
			t.Fatal(err)
		}
		err = c.checkMesh(tc.size)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%v at %d ranks: %v, want %q", tc.args, tc.size, err, tc.want)
		}
	}
}

// TestGlobalBatch: a --batch left out is rounded to split into replicas x
// micro-batches, with a note where it grows past the default; one given
// must split, and the error gives the multiple that does.
func TestGlobalBatch(t *testing.T) {
	for _, tc := range []struct {
		args       []string
		dp         int
		want       int
		note, fail string
	}{
		{nil, 1, 16, "", ""},
		{nil, 3, 12, "", ""},
		{nil, 6, 24, "note: the default batch of 16 does not split into 6 replicas x 4 micro-batches: training with batch 24", ""},
		{[]string{"--microbatches", "1"}, 6, 12, "", ""},
		{nil, 8, 32, "note: the default batch of 16 does not split into 8 replicas x 4 micro-batches: training with batch 32", ""},
		{[]string{"--batch", "16"}, 3, 0, "", "--batch 16 does not split into 3 replicas x 4 micro-batches: pass a multiple of 12"},
		{[]string{"--batch", "24"}, 3, 24, "", ""},
	} {
		c, err := parseFlags(flag.NewFlagSet("gpt", flag.ContinueOnError), tc.args)
		if err != nil {
			t.Fatal(err)
		}
		b, note, err := c.globalBatch(tc.dp)
		switch {
		case tc.fail != "" && (err == nil || !strings.Contains(err.Error(), tc.fail)):
			t.Errorf("%v at dp %d: %v, want %q", tc.args, tc.dp, err, tc.fail)
		case tc.fail == "" && (err != nil || b != tc.want || !strings.Contains(note, tc.note) || tc.note == "" && note != ""):
			t.Errorf("%v at dp %d: batch %d, note %q, %v; want %d, note %q", tc.args, tc.dp, b, note, err, tc.want, tc.note)
		}
	}
}
