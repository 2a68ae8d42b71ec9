package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gorun-hpc/gorun/spmd/launch"
)

// splitApps splits the first program's arguments at each ":", Open MPI's
// MPMD syntax: gorun -np 1 ./server : -np 4 ./worker ARGS. It returns the
// first program's own arguments and the programs after it, each with its
// -np (or -n) and -x options, then its program and arguments; a ":"
// always separates programs, as in mpirun.
// fs, gorun's flags, tell a flag not taken per program from a mistake.
func splitApps(args []string, fs []cli.Flag) (apps []launch.App, first []string, err error) {
	cut := indexOf(args, ":")
	if cut < 0 {
		return nil, args, nil
	}
	first, rest := args[:cut], args[cut+1:]
	for n := 2; ; n++ {
		part := rest
		next := indexOf(rest, ":")
		if next >= 0 {
			part, rest = rest[:next], rest[next+1:]
		}
		app, err := parseApp(part, n, fs)
		if err != nil {
			return nil, nil, err
		}
		apps = append(apps, app)
		if next < 0 {
			return apps, first, nil
		}
	}
}

// parseApp reads one program context after a ":": its options, then its
// program and arguments. n counts the programs, from 1.
func parseApp(part []string, n int, fs []cli.Flag) (launch.App, error) {
	var app launch.App
	where := fmt.Sprintf("program %d (after \":\" number %d)", n, n-1)
	for i := 0; i < len(part); i++ {
		a := part[i]
		if !strings.HasPrefix(a, "-") {
			app.Program, app.Args = a, part[i+1:]
			break
		}
		flag := strings.TrimPrefix(a, "-")
		if !strings.HasPrefix(flag, "--") { // -np and --np, not ---np
			flag = strings.TrimPrefix(flag, "-")
		}
		name, val, hasVal := strings.Cut(flag, "=")
		if name != "np" && name != "n" && name != "x" && lookupFlag(name, fs) == nil {
			if strings.HasPrefix(name, "-") { // ---np
				return app, fmt.Errorf("%s: unknown flag %s: see gorun --help", where, a)
			}
			return app, fmt.Errorf("%s: %w", where, flagMistake(errors.New("flag provided but not defined: -"+name), fs))
		}
		if !hasVal {
			if i+1 >= len(part) {
				return app, fmt.Errorf("%s: %s needs a value (see gorun --help)", where, a)
			}
			i++
			val = part[i]
		}
		switch name {
		case "np", "n":
			np, err := strconv.Atoi(val)
			switch {
			case err != nil:
				return app, fmt.Errorf("%s: -np %q: want a whole number of ranks, 1 or more", where, val)
			case np < 1:
				return app, fmt.Errorf("%s: -np %d: want at least 1 rank", where, np)
			}
			if app.NP != 0 {
				return app, fmt.Errorf("%s: -np %d and -np %d: give a program's -np once", where, app.NP, np)
			}
			app.NP = np
		case "x":
			app.Export = append(app.Export, val)
		default:
			return app, fmt.Errorf("%s: %s is not taken per program: give -np N and -x VAR there, the other flags before the first program", where, a)
		}
	}
	switch {
	case app.Program == "":
		return app, fmt.Errorf("%s: no program: write gorun -np N PROG : -np M PROG2", where)
	case app.NP == 0:
		return app, fmt.Errorf("%s: how many ranks of %s? give -np M before it, as in gorun -np 1 ./server : -np 4 %s", where, app.Program, app.Program)
	}
	return app, nil
}

func indexOf(args []string, s string) int {
	for i, a := range args {
		if a == s {
			return i
		}
	}
	return -1
}
