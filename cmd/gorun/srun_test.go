package main

import (
	"os"
	"path/filepath"
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
