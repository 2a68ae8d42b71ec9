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

// TestFlagMistakes: each mistake is an error that names the flag and says
// what to pass, at parsing or, where it depends on the number of workers,
// once the job's layout is known.
func TestFlagMistakes(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		workers int
		want    string
	}{
		{[]string{"--slow-worker", "-2"}, 3, "--slow-worker -2: want a worker, 0 or more"},
		{[]string{"--slow-delay", "-1s"}, 3, "--slow-delay -1s"},
		{[]string{"--staleness", "-1"}, 3, "--staleness -1"},
		{[]string{"--slow-worker", "5"}, 3, "--slow-worker 5: the job has 3 workers: pass 0 to 2"},
		{[]string{"--batch", "64"}, 3, "--batch 64 does not split into 3 workers x 1 micro-batch: pass a multiple of 3"},
	} {
		cfg, err := Parser(ByRank)(newFlagSet(), tc.args)
		if err == nil {
			err = cfg.checkWorkers(tc.workers)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v with %d workers: %v, want an error saying %q", tc.args, tc.workers, err, tc.want)
		}
	}
	// The default batch splits over any number of workers.
	cfg, err := Parser(ByRank)(newFlagSet(), []string{"--slow-worker", "2"})
	if err == nil {
		err = cfg.checkWorkers(3)
	}
	if err != nil {
		t.Errorf("the defaults with --slow-worker 2 and 3 workers: %v", err)
	}
}
