package main

import (
	"github.com/urfave/cli/v2"

	"github.com/gorun-hpc/gorun/spmd/launch"
)

// Flag names, shared by the flag list and applyFlags.
const (
	flagNP          = "np"
	flagExport      = "x"
	flagTagOutput   = "tag-output"
	flagTimestamp   = "timestamp-output"
	flagOutputDir   = "output-dir"
	flagStdin       = "stdin"
	flagTimeout     = "timeout"
	flagKillGrace   = "kill-grace"
	flagInitTimeout = "init-timeout"
	flagWdir        = "wdir"
	flagVersion     = "version"
	flagHelp        = "help"
	flagProfile     = "profile"
	flagProfileCPU  = "profile-cpu"
	flagMaxRestarts = "max-restarts"
	flagConfig      = "config"
	flagDryRun      = "dry-run"
	flagVerbose     = "verbose"
	flagQuiet       = "quiet"

	flagHosts          = "host"
	flagHostfile       = "hostfile"
	flagMapBy          = "map-by"
	flagNPerNode       = "npernode"
	flagOversubscribe  = "oversubscribe"
	flagBindTo         = "bind-to"
	flagReportBindings = "report-bindings"
	flagTimerSlack     = "timer-slack"
	flagSSHArgs        = "ssh-args"
	flagLaunchAgent    = "launch-agent"
	flagConnectTimeout = "connect-timeout"
	flagAgentTimeout   = "agent-timeout"
	flagSpawnRadix     = "spawn-radix"
	flagPreload        = "preload"
	flagIface          = "iface"
	flagNet            = "net"
	flagPorts          = "ports"
	flagTopo           = "topo"
	flagTune           = "tune"
	flagTuneSizes      = "tune-sizes"
	flagTuneJSON       = "tune-json"
	flagAgent          = "agent"             // hidden: run as a host's agent
	flagTopoRank       = "topo-rank"         // hidden: run as a rank of --topo
	flagTuneRank       = "tune-rank"         // hidden: run as a rank of --tune
	flagCgroupGuard    = "cgroup-guard"      // hidden: guard a job's cgroup
	flagAllowRoot      = "allow-run-as-root" // hidden: mpirun's, accepted and ignored
)

func flags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: flagNP, Aliases: []string{"n"}, Usage: "start `N` ranks (with a host list, default one per slot)"},
		&cli.StringFlag{Name: flagHosts, Aliases: []string{"H"}, Usage: "run on `HOSTS`, as in node1:2,node2:2 (host:slots, comma-separated)"},
		&cli.StringFlag{Name: flagHostfile, Aliases: []string{"machinefile"}, Usage: "run on the hosts of `FILE` (Open MPI, MPICH or DeepSpeed format; see gorun-hostfile(5))"},
		&cli.StringFlag{Name: flagMapBy, Value: "slot", Usage: "place ranks by `POLICY`: slot fills each host's slots in turn, node deals ranks round-robin over hosts"},
		&cli.IntFlag{Name: flagNPerNode, Usage: "place exactly `N` ranks on each host"},
		&cli.BoolFlag{Name: flagOversubscribe, Usage: "allow more ranks than slots on a host (up to its max_slots), or, without a host list, more than 64 ranks per CPU of this machine"},
		&cli.StringFlag{Name: flagBindTo, Value: "auto", Usage: "bind each rank to a `UNIT` of its host's CPUs, in local rank order: none, hwthread, core or socket (:overload-allowed lets ranks share one); auto binds the ranks of a Go program to cores where a host's ranks are as many as its cores, 2 or more, and else not at all"},
		&cli.StringFlag{Name: flagTimerSlack, Value: "auto", Usage: "let the kernel fire each rank's timers up to `SLACK` late (prctl PR_SET_TIMERSLACK): a duration up to 1s, or 0 to leave it alone; auto gives 500us to Go ranks bound to one CPU of their own on a host of at most 2 ranks, which keeps the Go runtime's sysmon from taking a tenth of it"},
		&cli.BoolFlag{Name: flagReportBindings, Usage: "print each rank's binding to standard error as it starts"},
		&cli.StringFlag{Name: flagSSHArgs, Usage: "pass `ARGS` to ssh, split like a shell would, as in \"-F cfg -p 2222\""},
		&cli.StringFlag{Name: flagLaunchAgent, Usage: "start agents with `CMD` HOST COMMAND instead of ssh (an rsh-like command)"},
		&cli.DurationFlag{Name: flagConnectTimeout, Value: launch.DefaultConnectTimeout, Usage: "give up on a host whose agent has not answered within `DURATION` (and a second, per level of the spawn tree; ssh gets it as ConnectTimeout), killing its ssh or launch agent; 0: no limit"},
		&cli.DurationFlag{Name: flagAgentTimeout, Value: launch.DefaultAgentTimeout, Usage: "have each host's agent that hears nothing from gorun for `DURATION` (a host cut off, a hung launcher) stop its ranks and exit, and give up a host whose agent says nothing for as long; both send keepalives six times as often; 0: no limit"},
		&cli.IntFlag{Name: flagSpawnRadix, Value: launch.DefaultSpawnRadix, Usage: "start at most `N` agents from gorun and from each agent (a tree: O(log hosts) rounds)"},
		&cli.BoolFlag{Name: flagPreload, Usage: "copy gorun and the program to a temporary directory on each host first (removed at the end)"},
		&cli.StringFlag{Name: flagIface, Usage: "listen on the address of interface `NAME` on every host (as eth0, ib0)"},
		&cli.StringFlag{Name: flagNet, Usage: "listen on each host's address inside `CIDR` (as 10.0.0.0/8)"},
		&cli.StringFlag{Name: flagPorts, Usage: "keep every listener (seed, gossip, data plane) in ports `LOW-HIGH` (sets GORUN_PORTS)"},
		&cli.BoolFlag{Name: flagTopo, Usage: "print the hosts, the ranks on each, the fitted link constants and the algorithm chosen per collective and size, then exit (no PROGRAM)"},
		&cli.BoolFlag{Name: flagTopoRank, Hidden: true, Usage: "run as a rank of gorun --topo"},
		&cli.BoolFlag{Name: flagTune, Usage: "time the algorithms of each collective on these ranks and hosts, write the fastest per size to the decision tables ($GORUN_TUNE_FILE, default $XDG_CACHE_HOME/gorun/tune.toml) that later jobs on them follow, print what was measured, then exit (no PROGRAM)"},
		&cli.StringFlag{Name: flagTuneSizes, Usage: "with --tune, time sizes from MIN to MAX bytes by factors of 4, as `MIN-MAX` (K, M suffixes; default 8-16M)"},
		&cli.StringFlag{Name: flagTuneJSON, Usage: "with --tune, also write all it measured to `FILE` as JSON, on rank 0's host: every algorithm's time for each collective and size, the model's constants and choices"},
		&cli.BoolFlag{Name: flagTuneRank, Hidden: true, Usage: "run as a rank of gorun --tune"},
		&cli.BoolFlag{Name: flagAllowRoot, Hidden: true, Usage: "accepted from mpirun command lines: gorun runs as root without it"},
		&cli.BoolFlag{Name: flagAgent, Hidden: true, Usage: "run as the agent of a host (started by gorun over ssh or srun)"},
		&cli.StringFlag{Name: flagCgroupGuard, Hidden: true, Usage: "guard the job's cgroup `DIR`: kill and remove it at the end of stdin (started by gorun)"},
		&cli.StringSliceFlag{Name: flagExport, Usage: "export `VAR` or VAR=VALUE to every rank (repeatable)"},
		&cli.StringFlag{Name: flagConfig, Usage: "read defaults from the TOML `FILE` (default $XDG_CONFIG_HOME/gorun/config.toml when present)"},
		&cli.BoolFlag{Name: flagTagOutput, Usage: "prefix every line of output with [rank]"},
		&cli.BoolFlag{Name: flagTimestamp, Usage: "prefix every line of output with the time it was written"},
		&cli.StringFlag{Name: flagOutputDir, Usage: "also write each rank's output to `DIR`/rank.N.out and DIR/rank.N.err (with --max-restarts, an earlier start's move to DIR/start.K)"},
		&cli.StringFlag{Name: flagStdin, Value: "0", Usage: "give gorun's standard input to `WHICH` ranks: none, all, or a rank number"},
		&cli.DurationFlag{Name: flagTimeout, Usage: "stop the job `DURATION` after its first start, restarts included, and exit 124 (0: no limit)"},
		&cli.IntFlag{Name: flagMaxRestarts, Usage: "when a rank fails, stop the job and start all its ranks again, up to `N` times, as torchrun --max-restarts (sets GORUN_RESTART_COUNT)"},
		&cli.DurationFlag{Name: flagKillGrace, Value: launch.DefaultKillGrace, Usage: "wait `DURATION` between SIGTERM and SIGKILL when stopping ranks"},
		&cli.DurationFlag{Name: flagInitTimeout, Usage: "have each rank's spmd.Init wait `DURATION` for all ranks (sets GORUN_INIT_TIMEOUT; unset, 60s)"},
		&cli.StringFlag{Name: flagWdir, Usage: "run the ranks in `DIR`, on every host"},
		&cli.StringFlag{Name: flagProfile, Usage: "have the ranks write trace files to `DIR` (created; sets GORUN_PROFILE_DIR); goprof reads them. Under --max-restarts DIR holds the last start's, and DIR/start.K the K-th start's (0: the first)"},
		&cli.BoolFlag{Name: flagProfileCPU, Usage: "with --profile, have each Go rank also write its CPU profile, DIR/rank.N.cpu.pprof (sets GORUN_PROFILE_CPU=1)"},
		&cli.BoolFlag{Name: flagDryRun, Usage: "print the plan (ranks, hosts, each rank's binding and the environment its start sets; another host's agent chooses GOMAXPROCS and the binding there) and start nothing"},
		&cli.BoolFlag{Name: flagVerbose, Usage: "log the launch and rendezvous steps, each line with the time of day to the microsecond as the ranks' are (sets GORUN_VERBOSE=1 for the ranks)"},
		&cli.BoolFlag{Name: flagQuiet, Aliases: []string{"q"}, Usage: "say nothing of what gorun sets for the ranks (OMP_NUM_THREADS, GOMAXPROCS, binding) or of oversubscription, as mpirun -q; failures are still reported"},
	}
}

// applyFlags sets the fields of cfg whose flags were given on the command
// line; flags override the config file. A host list on the command line
// (-H or --hostfile) replaces the file's, whichever way the file gave it,
// and so does an address (--iface or --net); both ways on the command
// line stay an error of Validate.
func applyFlags(cliCtx *cli.Context, cfg *launch.Config) {
	set := cliCtx.IsSet
	for _, alt := range []struct {
		flags  [2]string
		fields [2]*string
	}{
		{[2]string{flagHosts, flagHostfile}, [2]*string{&cfg.Hosts, &cfg.Hostfile}},
		{[2]string{flagIface, flagNet}, [2]*string{&cfg.Iface, &cfg.Net}},
	} {
		for i := range alt.flags {
			if set(alt.flags[i]) && !set(alt.flags[1-i]) {
				*alt.fields[1-i] = ""
			}
		}
	}
	for name, dst := range map[string]*string{
		flagOutputDir: &cfg.OutputDir, flagStdin: &cfg.Stdin, flagWdir: &cfg.Wdir, flagProfile: &cfg.ProfileDir,
		flagHosts: &cfg.Hosts, flagHostfile: &cfg.Hostfile, flagMapBy: &cfg.MapBy, flagBindTo: &cfg.BindTo,
		flagTimerSlack: &cfg.TimerSlack,
		flagSSHArgs:    &cfg.SSHArgs, flagLaunchAgent: &cfg.LaunchAgent,
		flagIface: &cfg.Iface, flagNet: &cfg.Net, flagPorts: &cfg.Ports,
	} {
		if set(name) {
			*dst = cliCtx.String(name)
		}
	}
	for name, dst := range map[string]*int{flagNP: &cfg.NP, flagNPerNode: &cfg.NPerNode, flagSpawnRadix: &cfg.SpawnRadix, flagMaxRestarts: &cfg.MaxRestarts} {
		if set(name) {
			*dst = cliCtx.Int(name)
		}
	}
	for name, dst := range map[string]*bool{
		flagTagOutput: &cfg.TagOutput, flagTimestamp: &cfg.TimestampOutput, flagVerbose: &cfg.Verbose, flagQuiet: &cfg.Quiet,
		flagOversubscribe: &cfg.Oversubscribe, flagPreload: &cfg.Preload, flagReportBindings: &cfg.ReportBindings,
		flagProfileCPU: &cfg.ProfileCPU,
	} {
		if set(name) {
			*dst = cliCtx.Bool(name)
		}
	}
	for name, dst := range map[string]*launch.Duration{
		flagTimeout: &cfg.Timeout, flagKillGrace: &cfg.KillGrace, flagInitTimeout: &cfg.InitTimeout,
		flagConnectTimeout: &cfg.ConnectTimeout, flagAgentTimeout: &cfg.AgentTimeout,
	} {
		if set(name) {
			*dst = launch.Duration(cliCtx.Duration(name))
		}
	}
	if set(flagExport) {
		cfg.Export = append(cfg.Export, cliCtx.StringSlice(flagExport)...)
	}
	for _, name := range cliCtx.FlagNames() {
		if set(name) {
			cfg.SetByFlag(name)
		}
	}
	cfg.DryRun = cliCtx.Bool(flagDryRun)
}
