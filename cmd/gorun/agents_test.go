package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// fakeSrun is an srun that runs its command here, as the node named by
// --nodelist, the way the agent path uses it: as srun does for a step of
// one task on one node, it sets that task's SLURM_* variables.
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
export SLURMD_NODENAME=$node SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NODEID=0 SLURM_NTASKS=1 SLURM_NPROCS=1 \
	SLURM_NNODES=1 SLURM_NODELIST=$node SLURM_STEP_NODELIST=$node SLURM_TASKS_PER_NODE=1 SLURM_STEP_NUM_TASKS=1
exec "$@"
`

// fakeScontrol answers "scontrol show node -o NODE" with an address on
// this machine, as Slurm would with the node's NodeAddr: gorun asks it
// for the nodes' addresses, and nothing asks DNS for the fake names.
const fakeScontrol = `#!/bin/sh
[ "$1 $2 $3" = "show node -o" ] || exit 1
echo "NodeName=$4 Arch=x86_64 NodeAddr=127.0.0.1 NodeHostName=$4 State=IDLE"
`

// fakeSlurm returns a directory with a fake srun and scontrol.
func fakeSlurm(t *testing.T) string {
	dir := t.TempDir()
	for name, script := range map[string]string{"srun": fakeSrun, "scontrol": fakeScontrol} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(script), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSrunAgents runs a job "inside a Slurm allocation" whose srun is a
// script: without -np gorun starts one rank per task of
// SLURM_TASKS_PER_NODE, through one agent per node, each rank with its
// node's name as host id.
func TestSrunAgents(t *testing.T) {
	dir := fakeSlurm(t)
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

// TestSrunTaskEnv: each rank of a job inside Slurm sees the SLURM_*
// variables of a task of one step of the job's ranks (its rank as
// SLURM_PROCID, the job's size as SLURM_NTASKS, ...), as under srun -n,
// not its agent's step of one task, which said 0 and 1 to every rank.
func TestSrunTaskEnv(t *testing.T) {
	dir := fakeSlurm(t)
	cmd := gorunCmd(t, "--tag-output", "sh", "-c", `echo "$SLURM_PROCID $SLURM_LOCALID $SLURM_NODEID $SLURM_NTASKS $SLURM_NPROCS`+
		` $SLURM_NNODES $SLURM_NODELIST $SLURM_STEP_NODELIST $SLURM_TASKS_PER_NODE $SLURM_STEP_NUM_TASKS"`)
	cmd.Env = append(cmd.Env, "PATH="+dir+":"+os.Getenv("PATH"),
		"SLURM_JOB_NODELIST=n[1-3]", "SLURM_TASKS_PER_NODE=2(x2),1")
	var stdout, stderr syncBuffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\n%s", err, stderr.String())
	}
	want := strings.Join([]string{
		"[0] 0 0 0 5 5 3 n1,n2,n3 n1,n2,n3 2(x2),1 5",
		"[1] 1 1 0 5 5 3 n1,n2,n3 n1,n2,n3 2(x2),1 5",
		"[2] 2 0 1 5 5 3 n1,n2,n3 n1,n2,n3 2(x2),1 5",
		"[3] 3 1 1 5 5 3 n1,n2,n3 n1,n2,n3 2(x2),1 5",
		"[4] 4 0 2 5 5 3 n1,n2,n3 n1,n2,n3 2(x2),1 5",
	}, "\n")
	if got := strings.Join(lines(stdout.String()), "\n"); got != want {
		t.Errorf("ranks said\n%s\nwant\n%s\nstderr:\n%s", got, want, stderr.String())
	}
}

// TestSrunMissing: inside a Slurm allocation without srun on PATH gorun
// refuses the job as a usage error before it tries a node, as it does
// without ssh, instead of losing every node's agent (status 255).
func TestSrunMissing(t *testing.T) {
	cmd := gorunCmd(t, "-np", "2", "/bin/true")
	cmd.Env = append(cmd.Env, "PATH="+t.TempDir(), "SLURM_JOB_NODELIST=n[1-2]", "SLURM_TASKS_PER_NODE=1(x2)")
	r := runGorun(t, cmd)
	if r.code != 2 || !strings.HasPrefix(r.stderr, "gorun: srun: not found on PATH; inside a Slurm allocation") || strings.Contains(r.stderr, "host n") {
		t.Errorf("want status 2 and one line saying srun is not on PATH\n%v", r)
	}
}

// TestSrunOfGorun: gorun run by srun as several tasks (srun -N2 gorun, as
// torchrun is run) refuses the job on each, which would otherwise start it
// once per task; a step of one task is let be.
func TestSrunOfGorun(t *testing.T) {
	for _, tc := range []struct {
		name  string
		tasks string // SLURM_STEP_NUM_TASKS
		code  int
	}{
		{"one task", "1", 0},
		{"two tasks", "2", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := gorunCmd(t, "--dry-run", "/bin/true")
			cmd.Env = append(cmd.Env, "SLURM_JOB_NODELIST=n[1-2]", "SLURM_TASKS_PER_NODE=1(x2)",
				"SLURM_STEP_ID=0", "SLURM_STEP_NUM_TASKS="+tc.tasks)
			r := runGorun(t, cmd)
			if r.code != tc.code || tc.code == 2 && !strings.HasPrefix(r.stderr, "gorun: started as each of the 2 tasks of a Slurm step (SLURM_STEP_NUM_TASKS=2)") {
				t.Errorf("want status %d\n%v", tc.code, r)
			}
		})
	}
}

// stepOfOne is the environment srun -n1 gives its one task inside salloc
// -N2 -n8 (as Slurm 22.05 set it on a real cluster): the job's nodes and
// CPUs, but the step's own tasks (one, on n1) in SLURM_TASKS_PER_NODE,
// SLURM_NTASKS and SLURM_NNODES.
var stepOfOne = []string{
	"SLURM_JOB_ID=7", "SLURM_JOB_NODELIST=n[1-2]", "SLURM_NODELIST=n[1-2]", "SLURM_JOB_NUM_NODES=2",
	"SLURM_JOB_CPUS_PER_NODE=4(x2)", "SLURM_NNODES=1", "SLURM_NTASKS=1", "SLURM_NPROCS=1", "SLURM_TASKS_PER_NODE=1",
	"SLURM_STEP_ID=0", "SLURM_STEPID=0", "SLURM_STEP_NODELIST=n1", "SLURM_STEP_NUM_NODES=1",
	"SLURM_STEP_NUM_TASKS=1", "SLURM_STEP_TASKS_PER_NODE=1", "SLURM_PROCID=0", "SLURM_LOCALID=0",
	"SLURM_NODEID=0", "SLURMD_NODENAME=n1", "SLURM_CPUS_ON_NODE=4", "SLURM_DISTRIBUTION=cyclic",
}

// TestSrunStepOfOne: gorun run as the one task of a step (srun -n1 gorun,
// as srun -n1 mpirun) places its ranks on the job's allocation, one per
// CPU of the job's on each node, not on the step's one task (it said that
// SLURM_TASKS_PER_NODE gave counts for 1 node of 2, or, on one node, that
// the job had 1 task).
func TestSrunStepOfOne(t *testing.T) {
	oneNode := []string{"SLURM_JOB_NODELIST=n1", "SLURM_NODELIST=n1", "SLURM_JOB_NUM_NODES=1", "SLURM_JOB_CPUS_PER_NODE=4"}
	for _, tc := range []struct {
		name string
		np   []string
		env  []string // over stepOfOne
		want []string // per rank: node, node rank, local rank, SLURM_PROCID, SLURM_NTASKS, SLURM_TASKS_PER_NODE
	}{
		{"two nodes, -np 8", []string{"-np", "8"}, nil, []string{
			"[0] n1 0 0 0 8 4(x2)", "[1] n1 0 1 1 8 4(x2)", "[2] n1 0 2 2 8 4(x2)", "[3] n1 0 3 3 8 4(x2)",
			"[4] n2 1 0 4 8 4(x2)", "[5] n2 1 1 5 8 4(x2)", "[6] n2 1 2 6 8 4(x2)", "[7] n2 1 3 7 8 4(x2)"}},
		{"two nodes, --npernode 1", []string{"--npernode", "1"}, nil, []string{"[0] n1 0 0 0 2 1(x2)", "[1] n2 1 0 1 2 1(x2)"}},
		{"one node, -np 4", []string{"-np", "4"}, oneNode, []string{
			"[0] n1 0 0 0 4 4", "[1] n1 0 1 1 4 4", "[2] n1 0 2 2 4 4", "[3] n1 0 3 3 4 4"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := fakeSlurm(t)
			args := append(append([]string{"--tag-output"}, tc.np...), "sh", "-c",
				`echo "$SLURMD_NODENAME $GORUN_NODE_RANK $GORUN_LOCAL_RANK $SLURM_PROCID $SLURM_NTASKS $SLURM_TASKS_PER_NODE"`)
			cmd := gorunCmd(t, args...)
			cmd.Env = append(append(append(cmd.Env, "PATH="+dir+":"+os.Getenv("PATH")), stepOfOne...), tc.env...)
			r := runGorun(t, cmd)
			if got, want := strings.Join(lines(r.stdout), "\n"), strings.Join(tc.want, "\n"); r.code != 0 || got != want {
				t.Errorf("ranks said\n%s\nwant status 0 and\n%s\n%v", got, want, r)
			}
			if !strings.Contains(r.stderr, "gorun: running as the one task of Slurm step 7.0, whose SLURM_TASKS_PER_NODE is its own: placing ranks on the job's allocation, one task per CPU of SLURM_JOB_CPUS_PER_NODE=") {
				t.Errorf("no line saying where the ranks go\n%v", r)
			}
		})
	}
	t.Run("too many ranks", func(t *testing.T) {
		cmd := gorunCmd(t, "--dry-run", "-np", "9", "/bin/true")
		cmd.Env = append(cmd.Env, stepOfOne...)
		r := runGorun(t, cmd)
		want := "gorun: the Slurm job's allocation: 9 ranks requested but it has 8 tasks on 2 nodes (one task per CPU of SLURM_JOB_CPUS_PER_NODE=4(x2)); ask salloc or sbatch for more (-n), or pass --oversubscribe\n"
		if r.code != 2 || !strings.HasSuffix(r.stderr, want) {
			t.Errorf("want status 2 and %q\n%v", want, r)
		}
	})
}

// TestSrunTooManyRanks: more ranks than the allocation's tasks is said in
// Slurm's words (it said "the host list has 3 slots ...; add slots").
func TestSrunTooManyRanks(t *testing.T) {
	cmd := gorunCmd(t, "--dry-run", "-np", "8", "/bin/true")
	cmd.Env = append(cmd.Env, "SLURM_JOB_NODELIST=n[1-2]", "SLURM_TASKS_PER_NODE=2,1")
	r := runGorun(t, cmd)
	want := "gorun: the Slurm allocation: 8 ranks requested but it has 3 tasks on 2 nodes (SLURM_TASKS_PER_NODE); ask salloc or sbatch for more (-n), or pass --oversubscribe\n"
	if r.code != 2 || r.stderr != want {
		t.Errorf("want status 2 and %q\n%v", want, r)
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

// TestAgentFaults: what goes wrong on a host's side of the agents, through
// a fake rsh that runs the "remote" command here.
func TestAgentFaults(t *testing.T) {
	dir := t.TempDir()
	script := func(name, body string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
		return path
	}
	rsh := script("rsh", fakeRsh[len("#!/bin/sh\n"):])
	t.Run("stdin larger than a pipe", func(t *testing.T) {
		// Rank 0 reads no stdin and waits in spmd.Init for rank 1, which
		// its agent starts after it: its stdin, held for rank 0, must not
		// hold up the frame that starts rank 1.
		in := strings.Repeat("0123456789abcdef", 32<<10) // 512 KiB
		r := gorun(t, in, "--launch-agent", rsh, "-H", "127.0.0.2:2", "--init-timeout", "30s", "-np", "2", helloBin(t))
		if r.code != 0 || strings.Count(r.stdout, " of 2 on ") != 2 {
			t.Fatal(r)
		}
		r = gorun(t, in, "--launch-agent", rsh, "-H", "127.0.0.2:1", "-np", "1", "sh", "-c", "sleep 0.5; wc -c")
		if r.code != 0 || strings.TrimSpace(r.stdout) != fmt.Sprint(len(in)) {
			t.Fatal(r)
		}
	})
	t.Run("program gone on the host", func(t *testing.T) {
		// The program is here but not on the host (the rsh removes it):
		// a start failure, 127 as a shell says, which no restart retries.
		prog := script("prog", "exit 0\n")
		gone := script("rsh-gone", "rm -f "+prog+"\nshift\nexec sh -c \"$*\"\n")
		r := gorun(t, "", "--launch-agent", gone, "-H", "127.0.0.2:1", "--max-restarts", "2", "-np", "1", prog)
		if r.code != 127 || !strings.Contains(r.stderr, "gorun: host 127.0.0.2: rank 0: start "+prog+": ") ||
			strings.Contains(r.stderr, "restart") || strings.Contains(r.stderr, "pid 0") {
			t.Fatal(r)
		}
	})
	t.Run("wdir missing on the host", func(t *testing.T) {
		wdir := filepath.Join(dir, "wdir")
		if err := os.Mkdir(wdir, 0o755); err != nil {
			t.Fatal(err)
		}
		gone := script("rsh-nowdir", "rmdir "+wdir+"\nshift\nexec sh -c \"$*\"\n")
		r := gorun(t, "", "--launch-agent", gone, "-H", "127.0.0.2:1", "--wdir", wdir, "-np", "1", "pwd")
		if r.code != 2 || !strings.Contains(r.stderr, "gorun: host 127.0.0.2: rank 0: --wdir "+wdir+": no such file or directory on this host") {
			t.Fatal(r)
		}
	})
	t.Run("another release's agent", func(t *testing.T) {
		// An agent of protocol 1 (gorun before the stdin acknowledgements)
		// says its preamble, then waits for its setup.
		old := script("rsh-old", "printf '\\nGORUN-AGENT 1\\n'\nexec cat >/dev/null\n")
		r := gorun(t, "", "--launch-agent", old, "-H", "127.0.0.2:1", "--connect-timeout", "20s", "-np", "1", "true")
		if r.code != 255 || !strings.Contains(r.stderr, `host 127.0.0.2: cannot start its agent: the gorun agent there speaks protocol "1", this gorun "3"`) ||
			!strings.Contains(r.stderr, "--preload") {
			t.Fatal(r)
		}
	})
}

// TestAgentGorunMissing: a host without gorun at the launcher's path (the
// remote shell's status 127) fails the job naming that path and
// --preload; it said only "rsh exited 127: ... not found". A copy of
// gorun runs the job, and the launch agent removes it before it runs the
// agent's command, as a host would lack it.
func TestAgentGorunMissing(t *testing.T) {
	dir := t.TempDir()
	self := filepath.Join(dir, "gorun")
	b, err := os.ReadFile(gorunBin)
	if err == nil {
		err = os.WriteFile(self, b, 0o755)
	}
	rsh := filepath.Join(dir, "rsh")
	if err == nil {
		err = os.WriteFile(rsh, []byte("#!/bin/sh\nrm -f "+self+"\n"+strings.TrimPrefix(fakeRsh, "#!/bin/sh\n")), 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	cmd := gorunCmd(t, "--launch-agent", rsh, "-H", "127.0.0.2:1", "-np", "1", "true")
	cmd.Path, cmd.Args[0] = self, self
	r := runGorun(t, cmd)
	want := "; gorun starts each host's agent as " + self + " there: install the same gorun at that path on every host (as on a shared file system), or give --preload to copy it\n"
	if r.code != 255 || !strings.HasPrefix(r.stderr, "gorun: host 127.0.0.2: cannot start its agent: rsh exited 127: ") || !strings.HasSuffix(r.stderr, want) {
		t.Errorf("want status 255 and a line that ends %q\n%v", want, r)
	}
}
