package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gorun-hpc/gorun/internal/suggest"
)

//go:generate go test -run TestManPage -update

// newApp builds the goprof command: one subcommand per output.
func newApp() *cli.App {
	return &cli.App{
		Name:      "goprof",
		Usage:     "report where the time of a gorun --profile job went",
		UsageText: "goprof COMMAND [flags] DIR",
		Description: "goprof reads the trace files (rank.N.trace) that gorun --profile DIR had every rank write, " +
			"and reports on the job: tables, wait states, a timeline, pictures, pprof profiles.",
		Commands:        commands(),
		HideHelpCommand: true,
		HideVersion:     true,
		OnUsageError: func(cliCtx *cli.Context, err error, _ bool) error {
			return usageError{fmt.Errorf("%v (see goprof --help)", err)}
		},
		ExitErrHandler: func(*cli.Context, error) {}, // only main exits
		Action: func(cliCtx *cli.Context) error {
			if cliCtx.Args().Len() == 0 {
				return usageError{errors.New("which command? goprof report DIR, timeline, svg, html, pprof or diff (see goprof --help)")}
			}
			return usageError{unknownCommand(cliCtx.Args().First(), cliCtx.App.Commands)}
		},
	}
}

// unknownCommand says what goprof could not take for a command, and what
// the user likely meant: a directory of traces (goprof DIR) is goprof
// report DIR; a misspelt command, the nearest one.
func unknownCommand(arg string, cmds []*cli.Command) error {
	const list = "goprof report DIR, timeline, svg, html, pprof or diff (see goprof --help)"
	if fi, err := os.Stat(arg); err == nil && fi.IsDir() {
		return fmt.Errorf("%s is a directory, not a command: goprof report %s reports on the job whose traces it holds; the commands are %s", arg, arg, list)
	}
	var names []string
	for _, c := range cmds {
		names = append(names, c.Name)
	}
	if near := suggest.Closest(arg, names); near != "" {
		return fmt.Errorf("unknown command %q: did you mean %s? The commands are %s", arg, near, list)
	}
	return fmt.Errorf("unknown command %q: %s", arg, list)
}

func commands() []*cli.Command {
	cmds := []*cli.Command{reportCommand(), timelineCommand(), svgCommand(), htmlCommand(), pprofCommand(), diffCommand()}
	for _, c := range cmds {
		c.OnUsageError = func(cliCtx *cli.Context, err error, _ bool) error {
			return usageError{fmt.Errorf("goprof %s: %v (see goprof %s --help)", cliCtx.Command.Name, err, cliCtx.Command.Name)}
		}
	}
	return cmds
}

// run runs the app on the command line args (args[0] is the program),
// with each command's flags accepted after its directories too, as
// goprof timeline DIR -o trace.json: the flag parser stops at the first
// argument that is not a flag, so they are moved before it.
func run(ctx context.Context, app *cli.App, args []string) error {
	return app.RunContext(ctx, flagsFirst(app, args))
}

// flagsFirst moves a command's flags (and their values) ahead of its
// other arguments; "--" ends the flags, as usual.
func flagsFirst(app *cli.App, args []string) []string {
	if len(args) < 3 {
		return args
	}
	cmd := app.Command(args[1])
	if cmd == nil {
		return args
	}
	takesValue := map[string]bool{}
	for _, f := range cmd.Flags {
		_, isBool := f.(*cli.BoolFlag)
		for _, n := range f.Names() {
			takesValue[n] = !isBool
		}
	}
	var flags, rest []string
	for i := 2; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' {
			rest = append(rest, a)
			continue
		}
		flags = append(flags, a)
		name := strings.TrimLeft(a, "-")
		if strings.Contains(name, "=") {
			continue
		}
		if takesValue[name] && i+1 < len(args) {
			i++
			flags = append(flags, args[i])
		}
	}
	out := append([]string{args[0], args[1]}, flags...)
	return append(out, rest...)
}

// usageError is a mistake on the command line; goprof exits 2.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// exitCode prints err and returns goprof's exit status: 0, 1 for a job
// that could not be read or an output that could not be written, 2 for a
// mistake on the command line.
func exitCode(err error, stderr io.Writer) int {
	if err == nil {
		return 0
	}
	msg := err.Error()
	if !strings.HasPrefix(msg, "goprof") {
		msg = "goprof: " + msg
	}
	fmt.Fprintln(stderr, msg)
	var u usageError
	if errors.As(err, &u) {
		return 2
	}
	return 1
}
