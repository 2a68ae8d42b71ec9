// Package launch is the library behind gorun(1): it turns a Config into a
// plan (rank -> host, local rank, environment), resolves or builds the
// program, starts every rank, forwards their output line by line, and
// supervises the job: the first failure, signals, the timeout and the exit
// status.
//
// The command in cmd/gorun only parses flags into a Config and calls Run.
// Starting a rank goes through a starter, so that a remote agent can start
// the ranks of another host behind the same supervisor; local starts them as
// child processes of this one.
//
// # Hosts
//
// The host list comes from -H, --hostfile, a Slurm allocation
// (SLURM_JOB_NODELIST) or, by default, this machine; package hosts parses it
// and maps the ranks (--map-by, --npernode, --oversubscribe). Every host
// other than this machine gets one agent: gorun itself in agent mode
// (RunAgent, the hidden flag --agent), started with the system ssh client
// in batch mode (remote, --ssh-args, --launch-agent) or with srun inside
// Slurm. Agents start agents: the launcher starts at most --spawn-radix of
// them, each of those at most as many again, so that N hosts take
// O(log N) rounds; frames for a host below an agent pass through it.
//
// # The agent protocol
//
// Over the agent's stdin and stdout, in frames (frame.go): the agent writes
// the line preamble, which names the protocol's version (what a remote
// shell printed before it is discarded; an agent of another version is
// refused, naming both), and hello, with its gorun's build; the launcher
// answers with setup (the job id, the secret, which never appears in any
// argv, the agent's subtree and how to reach it), the agent with ready, its
// CPUs and the address its ranks bind (the one that routes to the
// launcher's seed, or --iface/--net); then start, signal and stdin frames
// go down, started, output, exited (with the reason when a rank could not
// be started, which the supervisor takes as a start failure, as a local
// one), log,
// lost and stdin acknowledgement frames come up. An agent writes a rank's
// stdin on a goroutine of the rank's, never on the one that reads frames,
// and the launcher sends at most stdinWindow bytes of it unacknowledged.
// When its input ends the agent stops its ranks (SIGTERM, SIGKILL after the
// kill grace) and its children agents, and exits; so a dead launcher or
// link leaves nothing behind. A lost agent ends its host's ranks with a
// Status whose Lost says why, and the supervisor stops the job.
//
// # Containment
//
// Each rank runs in its own process group, killed by the kernel if its
// starter dies (Pdeathsig); the starters are subreapers (Subreap), so what
// a rank leaves behind is killed at the end of the job (KillOrphans).
// Where cgroup v2 allows, each starter also starts its host's ranks into a
// cgroup of the job's, which it kills and removes at the end, and which a
// guard (RunGuard, the hidden flag --cgroup-guard) kills and removes should
// the starter die first, even by SIGKILL (cgroup_linux.go).
package launch
