package main

import (
	"bytes"
	"fmt"
	"math"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/spmdtest/proctest"
)

var small = []string{"--hidden", "32,24", "--examples", "480", "--batch", "24", "--lr", "0.1", "--steps", "15"}

// output runs a command and returns its standard output; it fails t on error.
func output(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.WaitDelay = 10 * time.Second
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %v\n%s%s", cmd.Args, err, out, stderr.String())
	}
	return string(out)
}

func losses(out string) []float64 {
	var v []float64
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) == 6 && f[0] == "step" {
			x, _ := strconv.ParseFloat(f[3], 64)
			v = append(v, x)
		}
	}
	return v
}

// TestProcesses: synchronous parameter servers under gorun (1 and 2
// servers, 2 workers) report the losses of DDP on 2 ranks, and ps alone
// those of one process; asynchronous training with a slowed worker runs
// to the end. Then the MPMD form (testMPMD).
func TestProcesses(t *testing.T) {
	built := proctest.Build(t, "../../cmd/gorun", ".", "../ddp", "./server", "./worker")
	bins := map[string]string{"gorun": built[0], "ps": built[1], "ddp": built[2], "server": built[3], "worker": built[4]}
	gorun := func(np int, prog string, args ...string) []float64 {
		return losses(output(t, bins["gorun"], append([]string{"-np", fmt.Sprint(np), "--timeout", "2m", bins[prog]}, append(args, small...)...)...))
	}
	want := gorun(2, "ddp")
	for _, servers := range []int{1, 2} {
		got := gorun(2+servers, "ps", "--servers", fmt.Sprint(servers))
		if len(got) != len(want) {
			t.Fatalf("%d servers: %d steps reported, want %d", servers, len(got), len(want))
		}
		for i := range want {
			if math.Abs(got[i]-want[i]) > 1e-5*math.Abs(want[i])+1e-6 {
				t.Errorf("%d servers: step %d loss %.6f, DDP %.6f", servers, i+1, got[i], want[i])
			}
		}
	}
	alone := losses(output(t, bins["ps"], small...))
	one := losses(output(t, bins["ddp"], small...))
	if fmt.Sprint(alone) != fmt.Sprint(one) {
		t.Errorf("ps alone %v, ddp alone %v", alone, one)
	}
	if async := gorun(4, "ps", "--staleness", "2", "--slow-worker", "1", "--slow-delay", "5ms"); len(async) != 15 {
		t.Errorf("async run reported %d steps, want 15", len(async))
	}
	t.Run("MPMD", func(t *testing.T) { testMPMD(t, bins) })
}

// testMPMD: servers and workers as the two programs of an MPMD job train
// as the one program does with the same seed and shape (2 servers, 2
// workers), loss for loss; a layout the programs cannot train with fails
// on every rank with a message that says what to run.
func testMPMD(t *testing.T, bins map[string]string) {
	gorun, one, server, worker := bins["gorun"], bins["ps"], bins["server"], bins["worker"]
	spmd := output(t, gorun, append([]string{"-np", "4", "--timeout", "2m", one, "--servers", "2"}, small...)...)
	mpmd := output(t, gorun, append(append(append([]string{"-np", "2", "--timeout", "2m", server}, small...), ":", "-np", "2", worker), small...)...)
	if got, want := losses(mpmd), losses(spmd); len(want) != 15 || fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("MPMD losses %v, want those of examples/ps --servers 2: %v", got, want)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"worker first", []string{"-np", "1", worker, ":", "-np", "1", server}, "rank 1 is a server after worker rank 0: list the servers first"},
		{"no server", []string{"-np", "2", worker}, "no server among the job's 2 ranks"},
		{"no worker", []string{"-np", "2", server}, "no worker among the job's 2 ranks"},
		{"flags differ", []string{"-np", "1", server, "--steps", "3", ":", "-np", "1", worker, "--steps", "4"},
			"rank 1 (worker) runs with --steps=4 but rank 0 (server) with --steps=3"},
		{"with the one program", []string{"-np", "1", server, ":", "-np", "1", one}, "rank 0 runs the server (examples/ps/server) and rank 1 examples/ps"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(gorun, append([]string{"--timeout", "1m"}, tc.args...)...)
			cmd.WaitDelay = 10 * time.Second
			out, err := cmd.CombinedOutput()
			if code := cmd.ProcessState.ExitCode(); err == nil || code != 1 || !strings.Contains(string(out), tc.want) {
				t.Errorf("gorun %q: want status 1 and %q, got %d:\n%s", tc.args, tc.want, code, out)
			}
		})
	}
}
