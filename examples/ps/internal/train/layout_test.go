package train

import (
	"flag"
	"strings"
	"testing"
)

func TestCheckRoles(t *testing.T) {
	S, W, P := Server, Worker, ByRank
	for _, tc := range []struct {
		name    string
		roles   []Role
		byRank  int
		servers int
		err     string // "" for none
	}{
		{"one server", []Role{S, W, W}, 0, 1, ""},
		{"two servers", []Role{S, S, W, W}, 0, 2, ""},
		{"spmd", []Role{P, P, P}, 1, 1, ""},
		{"spmd, no worker", []Role{P, P}, 2, 0, "--servers 2 with 2 ranks leaves no worker"},
		{"worker first", []Role{W, S}, 0, 0, "rank 1 is a server after worker rank 0: list the servers first"},
		{"server between workers", []Role{S, W, S, W}, 0, 0, "rank 2 is a server after worker rank 1"},
		{"no server", []Role{W, W}, 0, 0, "no server among the job's 2 ranks"},
		{"worker alone", []Role{W}, 0, 0, "no server among the job's 1 rank"},
		{"no worker", []Role{S, S}, 0, 0, "no worker among the job's 2 ranks"},
		{"mixed", []Role{S, P}, 1, 0, "rank 0 runs the server (examples/ps/server) and rank 1 examples/ps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			servers, err := checkRoles(tc.roles, tc.byRank)
			switch {
			case tc.err == "" && (err != nil || servers != tc.servers):
				t.Errorf("got %d servers, %v; want %d", servers, err, tc.servers)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Errorf("got %d servers, error %v; want an error with %q", servers, err, tc.err)
			}
		})
	}
}

// TestTrainingFlags: the flags the ranks compare are the training flags
// as set, and --servers for the one program.
func TestTrainingFlags(t *testing.T) {
	for _, role := range []Role{ByRank, Server, Worker} {
		cfg, err := Parser(role)(newFlagSet(), []string{"--steps", "7", "--staleness", "1"})
		if err != nil {
			t.Fatal(err)
		}
		got := strings.Join(cfg.trainingFlags(), " ")
		for _, want := range []string{"--steps=7", "--staleness=1", "--seed=1"} {
			if !strings.Contains(got, want) {
				t.Errorf("%v: %s lacks %s", role, got, want)
			}
		}
		if strings.Contains(got, "--servers") != (role == ByRank) || strings.Contains(got, "slow") {
			t.Errorf("%v: %s", role, got)
		}
	}
	if _, err := Parser(Server)(newFlagSet(), []string{"--slow-worker", "1"}); err == nil {
		t.Error("the server took --slow-worker")
	}
}

func newFlagSet() *flag.FlagSet { return flag.NewFlagSet("test", flag.ContinueOnError) }
