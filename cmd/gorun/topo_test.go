package main

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// gorun --topo runs its own probe on the ranks: the hosts, the fitted
// constants and a decision per collective.
func TestTopo(t *testing.T) {
	r := gorun(t, "", "--topo", "-np", "3")
	if r.code != 0 {
		t.Fatalf("gorun --topo:\n%s", r)
	}
	for _, want := range []string{"# 3 ranks on 1 host", "3 ranks:  0 1 2", "same host", "measured", "allreduce", "broadcast", "allgather"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, r)
		}
	}
	if n := strings.Count(r.stdout, "# model"); n != 1 {
		t.Errorf("report printed %d times, want once (by rank 0):\n%s", n, r)
	}
	// gorun's own ranks run no OpenMP: no line about OMP_NUM_THREADS,
	// whose advice (pass -x) would be about nothing the user runs.
	if strings.Contains(r.stderr, "OMP_NUM_THREADS") {
		t.Errorf("gorun --topo speaks of OMP_NUM_THREADS:\n%s", r)
	}
}

// TestTopoBound: ranks bound to a CPU each still count the host's CPUs
// as its cores, where they used to count their own one and take the host
// for a crowded one.
func TestTopoBound(t *testing.T) {
	if runtime.NumCPU() < 2 {
		t.Skipf("binding 2 ranks to CPUs of their own needs 2 CPUs, this machine has %d", runtime.NumCPU())
	}
	r := gorun(t, "", "--topo", "-np", "2", "--bind-to", "hwthread")
	want := fmt.Sprintf("cores       %d per host", runtime.NumCPU())
	if r.code != 0 || !strings.Contains(r.stdout, want) {
		t.Fatalf("gorun --topo of 2 bound ranks: want %q in\n%s", want, r)
	}
}

func TestTopoTakesNoProgram(t *testing.T) {
	r := gorun(t, "", "--topo", "-np", "2", "hostname")
	if r.code != 2 || !strings.Contains(r.stderr, "takes no PROGRAM") {
		t.Fatalf("want a usage error:\n%s", r)
	}
}
