package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorun-hpc/gorun/spmd/launch/netnstest"
)

// BenchmarkLaunchRig times launch to all-ranks-ready across three rig
// hosts with two ranks each: gorun of bench/launch/initbarrier (spmd.Init,
// one barrier, exit) against Open MPI's mpirun of bench/launch/init_barrier.c
// (MPI_Init, MPI_Barrier, MPI_Finalize), over the same hostfile and ssh
// config. The two alternate within each iteration so that both see the
// same machine load; it reports each one's mean and their ratio.
//
//	go test ./cmd/gorun -run NONE -bench LaunchRig -benchtime 10x
func BenchmarkLaunchRig(b *testing.B) {
	for _, tool := range []string{"mpirun", "mpicc"} {
		if _, err := exec.LookPath(tool); err != nil {
			b.Skipf("%s not found: install openmpi-bin and libopenmpi-dev", tool)
		}
	}
	rig := netnstest.New(b, 3)
	dir := b.TempDir()
	gobin, cbin := filepath.Join(dir, "initbarrier"), filepath.Join(dir, "init_barrier")
	if out, err := exec.Command("go", "build", "-o", gobin, "../../bench/launch/initbarrier").CombinedOutput(); err != nil {
		b.Fatalf("building initbarrier: %v\n%s", err, out)
	}
	if out, err := exec.Command("mpicc", "-O2", "-o", cbin, "../../bench/launch/init_barrier.c").CombinedOutput(); err != nil {
		b.Fatalf("mpicc: %v\n%s", err, out)
	}
	gorunArgs := []string{gorunBin, "--ssh-args", "-F " + rig.SSHConfig, "--hostfile", rig.Hostfile, "-np", "6", gobin}
	// Open MPI's daemons and ranks must talk over the rig's network only;
	// vader (shared memory) within a host, TCP across.
	mpirunArgs := []string{"mpirun", "--allow-run-as-root", "--hostfile", rig.Hostfile, "-np", "6",
		"--mca", "plm_rsh_args", "-F " + rig.SSHConfig,
		"--mca", "oob_tcp_if_include", rig.Subnet, "--mca", "btl_tcp_if_include", rig.Subnet,
		"--mca", "btl", "self,vader,tcp", cbin}
	run := func(argv []string) time.Duration {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(cmd.Environ(), "GORACE=atexit_sleep_ms=0")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		t0 := time.Now()
		err := cmd.Run()
		d := time.Since(t0)
		if err != nil {
			b.Fatalf("%s: %v\n%s", argv[0], err, out.String())
		}
		return d
	}
	run(gorunArgs) // warm up: page cache, sshd's first logins
	run(mpirunArgs)
	var g, m time.Duration
	b.ResetTimer()
	for range b.N {
		g += run(gorunArgs)
		m += run(mpirunArgs)
	}
	b.StopTimer()
	n := float64(b.N)
	b.ReportMetric(g.Seconds()*1000/n, "gorun-ms")
	b.ReportMetric(m.Seconds()*1000/n, "mpirun-ms")
	b.ReportMetric(g.Seconds()/m.Seconds(), "gorun/mpirun")
	b.ReportMetric(0, "ns/op")
}
