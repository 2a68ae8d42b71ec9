// Package slurmtest runs a real Slurm cluster on the test machine, for
// tests of launchers that start their ranks inside a Slurm allocation.
//
// New(t, 3) starts a munged with a key of its own, a slurmctld and one
// slurmd per node (n1 to n3, each with 2 CPUs, in one partition "debug"),
// all on 127.0.0.1 with ports chosen free, and returns once sinfo shows
// every node idle. Commands built by the Cluster (Command, CommandContext,
// Run) carry SLURM_CONF pointing at the rig's slurm.conf, so
//
//	c.Run(t, time.Minute, "salloc", "-N3", "-n6", "printenv", "SLURM_JOB_NODELIST")
//
// prints n[1-3], and srun inside it starts tasks on n1..n3, each with
// SLURMD_NODENAME set. Every node runs on this machine and reports the
// machine's hostname, so a launcher must take a task's host identity from
// Slurm (SLURMD_NODENAME), never from the hostname. The nodes share the
// machine's filesystem: paths (a gorun binary, a temp dir) are the same on
// every node.
//
// The rig needs root and the Debian packages slurmctld, slurmd,
// slurm-client and munge, which New installs with apt-get when missing.
// Without root, or when the packages cannot be had, New skips the test with
// one line. Close, registered with t.Cleanup, stops every daemon the rig
// started by pid (SIGTERM, then SIGKILL), kills whatever the cluster's
// jobs left running (every process whose environment names the rig's
// slurm.conf, and their descendants), and removes the temp dir. Rigs left
// behind by a killed test binary are swept by the next New.
//
// The package's own tests are also gorun's end-to-end Slurm tests: they
// build gorun, examples/hello and testdata/slurmprobe (which prints each
// rank's SLURMD_NODENAME and GORUN_HOST_ID) and run them with salloc and
// sbatch --wait on a three-node cluster, including a job whose rank on n2
// kills itself and must leave no process behind.
package slurmtest
