package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fakeSrun is an srun that runs its command here, as the node named by
// --nodelist, the way the agent path uses it.
const fakeSrun = `#!/bin/sh
node=
while [ $# -gt 0 ]; do
	case "$1" in
	--nodelist=*) node=${1#--nodelist=}; shift ;;
	--*) shift ;;
	*) break ;;
	esac
done
echo "srun: fake banner on stdout"
SLURMD_NODENAME=$node exec "$@"
`

// TestSrunAgents runs a job "inside a Slurm allocation" whose srun is a
// script: without -np gorun starts one rank per task of
// SLURM_TASKS_PER_NODE, through one agent per node, each rank with its
// node's name as host id.
func TestSrunAgents(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "srun"), []byte(fakeSrun), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := gorunCmd(t, "--tag-output", "sh", "-c", `echo "$GORUN_HOST_ID $SLURMD_NODENAME $GORUN_NODE_RANK $GORUN_LOCAL_RANK"`)
	cmd.Env = append(cmd.Env, "PATH="+dir+":"+os.Getenv("PATH"),
		"SLURM_JOB_NODELIST=n[1-2]", "SLURM_TASKS_PER_NODE=2,1")
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	want := "[0] n1 n1 0 0\n[1] n1 n1 0 1\n[2] n2 n2 1 0"
	if got := strings.Join(lines(stdout.String()), "\n"); got != want {
		t.Errorf("ranks said\n%s\nwant\n%s\nstderr:\n%s", got, want, stderr.String())
	}
}

// fakeRsh is an rsh-like command that runs its command here, whatever the
// host: the agent path without ssh or root.
const fakeRsh = `#!/bin/sh
shift
exec sh -c "$*"
`

// TestAgentsWithoutSSH runs jobs through agents started by a fake rsh, one
// per "host" (loopback addresses, so that hosts differ), one agent
// starting the next (radix 1): hello across them, and a failing rank that
// stops the job on every host.
func TestAgentsWithoutSSH(t *testing.T) {
	rsh := filepath.Join(t.TempDir(), "rsh")
	if err := os.WriteFile(rsh, []byte(fakeRsh), 0o755); err != nil {
		t.Fatal(err)
	}
	base := []string{"--launch-agent", rsh, "-H", "127.0.0.2:2,127.0.0.3:1,127.0.0.4:1", "--spawn-radix", "1"}
	t.Run("hello", func(t *testing.T) {
		r := gorun(t, "", append(base, "--tag-output", helloBin(t))...)
		if r.code != 0 || strings.Count(r.stdout, " of 4 on ") != 4 {
			t.Fatal(r)
		}
	})
	t.Run("host ids and relayed output", func(t *testing.T) {
		r := gorun(t, "", append(base, "sh", "-c", `echo "$GORUN_RANK $GORUN_HOST_ID"`)...)
		want := "0 127.0.0.2,1 127.0.0.2,2 127.0.0.3,3 127.0.0.4"
		if got := strings.Join(lines(r.stdout), ","); r.code != 0 || got != want {
			t.Fatalf("got %q, want %q\n%s", got, want, r)
		}
	})
	t.Run("the first failure across hosts", func(t *testing.T) {
		// Ranks 1-3 lose rank 0, which failed on its own, and exit
		// first; their agents pass on what they lost (GORUN_STATUS_FD),
		// and gorun names rank 0.
		prog := filepath.Join(t.TempDir(), "errclose")
		if out, err := exec.Command("go", "build", "-o", prog, "./testdata/errclose").CombinedOutput(); err != nil {
			t.Fatalf("building testdata/errclose: %v\n%s", err, out)
		}
		r := gorun(t, "", append(base, prog)...)
		if r.code != 1 || !regexp.MustCompile(`gorun: rank 0 \(pid \d+ on 127\.0\.0\.2\) exited with status 1`).MatchString(r.stderr) {
			t.Fatal(r)
		}
	})
	t.Run("failing rank", func(t *testing.T) {
		r := gorun(t, "", append(base, "--kill-grace", "1s", "sh", "-c", `[ $GORUN_RANK = 3 ] && exit 7; exec sleep 300`)...)
		if r.code != 7 || !strings.Contains(r.stderr, "gorun: rank 3 (pid ") || !strings.Contains(r.stderr, " on 127.0.0.4) exited with status 7; stopping the other ranks") {
			t.Fatal(r)
		}
	})
}
