package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/gorun-hpc/gorun/spmd/launch"
	"github.com/gorun-hpc/gorun/spmd/launch/hosts"
)

//go:generate go test -run TestManPage -update

// The help writes -np as mpirun spells it, where urfave wrote "--np N"
// and every other text says -np, and leaves out "(default: 0)" and
// "(default: 0s)", where zero means unset (-np, --npernode,
// --max-restarts) or is explained by the usage (--timeout,
// --init-timeout).
func init() {
	// gorun's --help is its own flag (newApp): urfave's, which it would
	// still act on by this name, took the word after it for a command.
	cli.HelpFlag = nil
	plain := cli.FlagStringer
	cli.FlagStringer = func(f cli.Flag) string {
		s := strings.TrimSuffix(strings.TrimSuffix(plain(f), " (default: 0)"), " (default: 0s)")
		if rest, ok := strings.CutPrefix(s, "--"+flagNP+" "); ok {
			s = "-" + flagNP + " " + rest
		}
		return s
	}
}

// newApp builds the gorun command. sigs delivers the signals gorun
// receives, to the supervisor.
func newApp(sigs <-chan os.Signal) *cli.App {
	return &cli.App{
		Name:      "gorun",
		Usage:     "start the ranks of an SPMD program and supervise them",
		UsageText: "gorun [flags] PROGRAM [ARGS...]",
		Description: "gorun starts N copies (ranks) of PROGRAM, gives each its rank through the environment, " +
			"forwards their output line by line, and stops them all when one fails. " +
			"Flags after PROGRAM belong to the program.",
		Flags: append(flags(),
			&cli.BoolFlag{Name: flagVersion, Usage: "print gorun's version and exit"},
			&cli.BoolFlag{Name: flagHelp, Aliases: []string{"h"}, Usage: "print this help and exit"}),
		// urfave's own --help took the word after it for a command to
		// explain: gorun -np 2 --help ./prog said "No help topic".
		HideHelp:                  true,
		HideHelpCommand:           true,
		HideVersion:               true, // --version is ours: urfave's also takes -v
		DisableSliceFlagSeparator: true,
		OnUsageError: func(cliCtx *cli.Context, err error, _ bool) error {
			return usageError{flagMistake(err, cliCtx.App.Flags)}
		},
		ExitErrHandler: func(*cli.Context, error) {}, // only main exits
		Action: func(cliCtx *cli.Context) error {
			return run(cliCtx, sigs)
		},
	}
}

// run is the action of the app: config file, then flags, then the launcher.
func run(cliCtx *cli.Context, sigs <-chan os.Signal) error {
	if cliCtx.Bool(flagHelp) {
		return cli.ShowAppHelp(cliCtx)
	}
	if cliCtx.Bool(flagVersion) {
		_, err := fmt.Fprintln(cliCtx.App.Writer, "gorun", launch.Version())
		return err
	}
	if cliCtx.Bool(flagAgent) {
		return runAgent(cliCtx)
	}
	if dir := cliCtx.String(flagCgroupGuard); dir != "" {
		return runGuard(dir)
	}
	if cliCtx.Bool(flagTopoRank) {
		return runTopoRank(cliCtx.Context)
	}
	if cliCtx.Bool(flagTuneRank) {
		return runTuneRank(cliCtx.Context, cliCtx.String(flagTuneSizes), cliCtx.String(flagTuneJSON))
	}
	if err := emptyValues(cliCtx); err != nil {
		return err
	}
	cfg := launch.DefaultConfig()
	if err := loadConfig(cliCtx, &cfg); err != nil {
		return err
	}
	applyFlags(cliCtx, &cfg)
	for _, x := range cliCtx.StringSlice(flagExport) {
		if strings.HasPrefix(x, "-") { // gorun -x -np 2 ./prog took -np for the variable
			return usageError{fmt.Errorf("-x %s: a flag where -x wants VAR or VAR=VALUE, as in -x OMP_NUM_THREADS=4", x)}
		}
	}
	if cliCtx.IsSet(flagTuneSizes) && !cliCtx.Bool(flagTune) {
		return usageError{fmt.Errorf("%s goes with --tune, as in gorun --tune -np 4 %s 8-1M", dashed(flagTuneSizes), dashed(flagTuneSizes))}
	}
	if cliCtx.IsSet(flagTuneJSON) && !cliCtx.Bool(flagTune) {
		return usageError{fmt.Errorf("%s goes with --tune, as in gorun --tune -np 4 %s tune.json", dashed(flagTuneJSON), dashed(flagTuneJSON))}
	}
	args := cliCtx.Args().Slice()
	self := cliCtx.Bool(flagTopo) || cliCtx.Bool(flagTune) // gorun runs itself as the ranks
	if self {
		prog, progArgs, err := selfProgram(cliCtx, args)
		if err != nil {
			return err
		}
		args = append([]string{prog}, progArgs...)
		// gorun's own ranks run no OpenMP: the line that gorun set
		// OMP_NUM_THREADS, with its advice to pass -x, would be about
		// nothing the user runs.
		cfg.Export = append([]string{"OMP_NUM_THREADS=1"}, cfg.Export...)
	}
	if len(args) == 0 {
		return usageError{fmt.Errorf("no program to run: usage is %s (see gorun --help)", cliCtx.App.UsageText)}
	}
	if args[0] == ":" {
		return usageError{fmt.Errorf("program 1 of the MPMD job: no program before the first \":\": write gorun -np N PROG : -np M PROG2")}
	}
	cfg.Program, cfg.Args = args[0], args[1:]
	if !self {
		apps, first, err := splitApps(cfg.Args, cliCtx.App.Flags)
		if err != nil {
			return usageError{err}
		}
		cfg.Args, cfg.Apps = first, apps
	}
	// An MPMD job without the first -np is countApps's to say.
	if cfg.NP == 0 && !cliCtx.IsSet(flagNP) && cfg.NPerNode == 0 && len(cfg.Apps) == 0 && cfg.Hosts == "" && cfg.Hostfile == "" && !inSlurm() {
		example := "gorun -np 4 " + cfg.Program
		if _, err := exec.LookPath("help"); cfg.Program == "help" && err != nil {
			return usageError{fmt.Errorf("gorun has no help command: gorun --help lists the flags, and man gorun (man ./man/gorun.1 in the source) documents them")}
		}
		switch {
		case cliCtx.Bool(flagTopo): // cfg.Program is gorun itself
			example = "gorun --topo -np 4"
		case cliCtx.Bool(flagTune):
			example = "gorun --tune -np 4"
		}
		return usageError{fmt.Errorf("how many ranks? give -np N, as in %s", example)}
	}
	l := &launch.Launcher{
		Stdin:    os.Stdin,
		Stdout:   cliCtx.App.Writer,
		Stderr:   cliCtx.App.ErrWriter,
		Signals:  sigs,
		OpenSeed: openSeed,
		Guard:    guardCommand(),
	}
	status, err := l.Run(cliCtx.Context, cfg)
	if err != nil {
		return err
	}
	if status != 0 {
		return exitStatus(status)
	}
	return nil
}

// selfProgram is the program of --topo or --tune (not both), which run
// gorun itself as the ranks.
func selfProgram(cliCtx *cli.Context, args []string) (string, []string, error) {
	sizes := cliCtx.String(flagTuneSizes)
	switch {
	case cliCtx.Bool(flagTopo) && cliCtx.Bool(flagTune):
		return "", nil, usageError{fmt.Errorf("--topo and --tune are two jobs: run gorun --tune -np N first, then gorun --topo -np N shows what it chose")}
	case cliCtx.Bool(flagTune):
		if cliCtx.Int(flagNP) == 1 {
			return "", nil, usageError{fmt.Errorf("--tune -np 1: tuning needs 2 ranks or more (with one, every collective is a copy): use gorun --tune -np N, N the ranks of the jobs to tune for")}
		}
		return tuneProgram(args, sizes, cliCtx.String(flagTuneJSON))
	}
	return topoProgram(args)
}

// inSlurm reports whether gorun runs inside a Slurm allocation, whose
// hosts it then uses.
func inSlurm() bool {
	return os.Getenv(hosts.EnvSlurmNodeList) != "" || os.Getenv(hosts.EnvSlurmNodeListOld) != ""
}

// loadConfig decodes --config, or the default config file when it exists.
func loadConfig(cliCtx *cli.Context, cfg *launch.Config) error {
	if path := cliCtx.String(flagConfig); path != "" {
		return cfg.LoadTOML(path)
	}
	path := launch.DefaultConfigPath(os.Getenv)
	if path == "" {
		return nil
	}
	if _, err := os.Stat(path); err != nil {
		return nil
	}
	return cfg.LoadTOML(path)
}

// usageError is a mistake on the command line; gorun exits 2.
type usageError struct{ err error }

func (e usageError) Error() string        { return e.err.Error() }
func (e usageError) Is(target error) bool { return target == launch.ErrUsage }

// exitStatus is the job's exit status; the reason was printed already.
type exitStatus int

func (e exitStatus) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// exitCode prints err, unless it is the job's status, and returns the
// status gorun exits with.
func exitCode(err error, stderr io.Writer) int {
	var st exitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &st):
		return int(st)
	case errors.Is(err, syscall.EPIPE):
		// Its output closed (gorun --dry-run ... | head): quiet, with the
		// status of the SIGPIPE that gorun, which catches it to stop a
		// running job, no longer dies of.
		return 128 + int(syscall.SIGPIPE)
	}
	fmt.Fprintf(stderr, "gorun: %v\n", err)
	return launch.ExitCode(err)
}

// needValue are the flags whose empty value means nothing: an empty -H
// would run on no host list at all, silently on this one.
var needValue = []string{flagHosts, flagHostfile, flagStdin, flagIface, flagNet, flagPorts,
	flagOutputDir, flagWdir, flagMapBy, flagBindTo, flagTimerSlack, flagConfig, flagLaunchAgent, flagProfile, flagTuneSizes, flagTuneJSON}

// emptyValues refuses a flag of needValue given as "", or given another
// of gorun's flags as its value: gorun -H -np 2 ./prog took -np for the
// host list and 2 for the program.
func emptyValues(cliCtx *cli.Context) error {
	for _, name := range needValue {
		if !cliCtx.IsSet(name) {
			continue
		}
		v := cliCtx.String(name)
		if v == "" {
			return usageError{fmt.Errorf("%s \"\": give a value, or leave the flag out (see gorun --help)", dashed(name))}
		}
		if f, ok := strings.CutPrefix(v, "-"); ok {
			f, _, _ = strings.Cut(strings.TrimPrefix(f, "-"), "=")
			if lookupFlag(f, cliCtx.App.Flags) != nil {
				return usageError{fmt.Errorf("%s %s: a flag where %s wants its value (see gorun --help)", dashed(name), v, dashed(name))}
			}
		}
	}
	return nil
}
