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
	flagProfile     = "profile"
	flagConfig      = "config"
	flagDryRun      = "dry-run"
	flagVerbose     = "verbose"
)

func flags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: flagNP, Aliases: []string{"n"}, Usage: "start `N` ranks (all on this machine)"},
		&cli.StringSliceFlag{Name: flagExport, Usage: "export `VAR` or VAR=VALUE to every rank (repeatable)"},
		&cli.StringFlag{Name: flagConfig, Usage: "read defaults from the TOML `FILE` (default $XDG_CONFIG_HOME/gorun/config.toml when present)"},
		&cli.BoolFlag{Name: flagTagOutput, Usage: "prefix every line of output with [rank]"},
		&cli.BoolFlag{Name: flagTimestamp, Usage: "prefix every line of output with the time it was written"},
		&cli.StringFlag{Name: flagOutputDir, Usage: "also write each rank's output to `DIR`/rank.N.out and DIR/rank.N.err"},
		&cli.StringFlag{Name: flagStdin, Value: "0", Usage: "give gorun's standard input to `WHICH` ranks: none, all, or a rank number"},
		&cli.DurationFlag{Name: flagTimeout, Usage: "stop the job after `DURATION` and exit 124 (0: no limit)"},
		&cli.DurationFlag{Name: flagKillGrace, Value: launch.DefaultKillGrace, Usage: "wait `DURATION` between SIGTERM and SIGKILL when stopping ranks"},
		&cli.DurationFlag{Name: flagInitTimeout, Usage: "have each rank's spmd.Init wait `DURATION` for all ranks (sets GORUN_INIT_TIMEOUT)"},
		&cli.StringFlag{Name: flagWdir, Usage: "run the ranks in `DIR`"},
		&cli.StringFlag{Name: flagProfile, Usage: "have the ranks write trace files to `DIR` (created; sets GORUN_PROFILE_DIR)"},
		&cli.BoolFlag{Name: flagDryRun, Usage: "print the plan (ranks, hosts, environment) and start nothing"},
		&cli.BoolFlag{Name: flagVerbose, Usage: "log the launch and rendezvous steps (sets GORUN_VERBOSE=1 for the ranks)"},
	}
}

// applyFlags sets the fields of cfg whose flags were given on the command
// line; flags override the config file.
func applyFlags(cliCtx *cli.Context, cfg *launch.Config) {
	set := cliCtx.IsSet
	if set(flagNP) {
		cfg.NP = cliCtx.Int(flagNP)
	}
	if set(flagExport) {
		cfg.Export = append(cfg.Export, cliCtx.StringSlice(flagExport)...)
	}
	if set(flagTagOutput) {
		cfg.TagOutput = cliCtx.Bool(flagTagOutput)
	}
	if set(flagTimestamp) {
		cfg.TimestampOutput = cliCtx.Bool(flagTimestamp)
	}
	if set(flagOutputDir) {
		cfg.OutputDir = cliCtx.String(flagOutputDir)
	}
	if set(flagStdin) {
		cfg.Stdin = cliCtx.String(flagStdin)
	}
	durations := []struct {
		name string
		dst  *launch.Duration
	}{{flagTimeout, &cfg.Timeout}, {flagKillGrace, &cfg.KillGrace}, {flagInitTimeout, &cfg.InitTimeout}}
	for _, d := range durations {
		if set(d.name) {
			*d.dst = launch.Duration(cliCtx.Duration(d.name))
		}
	}
	if set(flagWdir) {
		cfg.Wdir = cliCtx.String(flagWdir)
	}
	if set(flagProfile) {
		cfg.ProfileDir = cliCtx.String(flagProfile)
	}
	if set(flagVerbose) {
		cfg.Verbose = cliCtx.Bool(flagVerbose)
	}
	cfg.DryRun = cliCtx.Bool(flagDryRun)
}
