package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/gorun-hpc/gorun/internal/suggest"
)

// flagMistake turns the flag parser's message about a command line into
// gorun's: the flag as the user wrote it, what was wrong, and what to write
// instead. "flag provided but not defined: -bind-too" becomes "unknown
// flag --bind-too: did you mean --bind-to?"; "invalid value "1x" for flag
// -timeout: parse error" becomes "--timeout "1x": want a duration such as
// 30s, 10m or 1h30m"; "flag needs an argument: -timeout" becomes
// "--timeout needs a value, a duration such as 30s, 10m or 1h30m". Other
// messages pass through.
func flagMistake(err error, fs []cli.Flag) error {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
		name = strings.TrimPrefix(name, "-")
		if hint, ok := foreignFlags[name]; ok {
			return fmt.Errorf("unknown flag %s: %s", dashed(name), hint)
		}
		if m := glued.FindStringSubmatch(name); m != nil {
			return fmt.Errorf("unknown flag -%s: write -%s %s, with a space (see gorun --help)", name, m[1], m[2])
		}
		if s := closest(name, fs); s != "" {
			return fmt.Errorf("unknown flag %s: did you mean %s? (see gorun --help)", dashed(name), dashed(s))
		}
		return fmt.Errorf("unknown flag %s: see gorun --help", dashed(name))
	}
	if name, ok := strings.CutPrefix(msg, "flag needs an argument: -"); ok {
		name = strings.TrimPrefix(name, "-")
		return fmt.Errorf("%s needs a value%s (see gorun --help)", dashed(name), example(lookupFlag(name, fs)))
	}
	if m := invalidValue.FindStringSubmatch(msg); m != nil {
		value, name := m[1], m[2]
		var want string
		switch lookupFlag(name, fs).(type) {
		case *cli.DurationFlag:
			want = "want a duration such as 30s, 10m or 1h30m"
			if durationSyntax.MatchString(value) {
				want = "too long: want at most 2562047h (a Go duration's limit, 292 years)"
			}
		case *cli.IntFlag:
			want = "want a whole number"
		case *cli.BoolFlag:
			want = "want true or false"
		}
		if want != "" {
			return fmt.Errorf("%s %q: %s (see gorun --help)", dashed(name), value, want)
		}
	}
	return fmt.Errorf("%v: see gorun --help", err)
}

// example says what a flag's value looks like, for a flag given none.
func example(f cli.Flag) string {
	switch f.(type) {
	case *cli.DurationFlag:
		return ", a duration such as 30s, 10m or 1h30m"
	case *cli.IntFlag:
		return ", a whole number"
	}
	return ""
}

// invalidValue matches the flag package's "invalid value "1x" for flag
// -timeout: ..." and, for a boolean flag given =VALUE, "invalid boolean
// value "2" for -verbose: ...".
var invalidValue = regexp.MustCompile(`^invalid (?:boolean )?value "(.*)" for (?:flag )?-([\w-]+): `)

// durationSyntax is a duration as Go writes one: a value that matches it
// and does not parse is out of range.
var durationSyntax = regexp.MustCompile(`^[-+]?(\d*\.?\d*(ns|us|µs|ms|s|m|h))+$`)

// glued is -np4 for -np 4.
var glued = regexp.MustCompile(`^(np|n)([0-9]+)$`)

// foreignFlags are flags of mpirun and torchrun that gorun does without,
// with what to do instead.
var foreignFlags = map[string]string{
	"mca":                    "gorun has no MCA parameters; GORUN_TRANSPORT=tcp makes all ranks talk over TCP (see gorun(1), ENVIRONMENT)",
	"nproc_per_node":         "give -np N for one host, or --npernode N with a host list",
	"nproc-per-node":         "give -np N for one host, or --npernode N with a host list",
	"nnodes":                 "give the hosts with -H or --hostfile; gorun starts them itself",
	"rdzv_endpoint":          "gorun starts every rank itself and needs no rendezvous endpoint; give the hosts with -H or --hostfile",
	"rdzv-endpoint":          "gorun starts every rank itself and needs no rendezvous endpoint; give the hosts with -H or --hostfile",
	"rdzv_backend":           "gorun runs its own rendezvous for every job: leave the flag out",
	"rdzv-backend":           "gorun runs its own rendezvous for every job: leave the flag out",
	"standalone":             "gorun runs its own rendezvous for every job: leave the flag out, and give -np N",
	"nproc":                  "give -np N for the number of ranks",
	"display-map":            "--dry-run prints which ranks go to which host (and their environment), and starts nothing",
	"output-filename":        "--output-dir DIR writes each rank's output to DIR/rank.N.out and DIR/rank.N.err",
	"merge-stderr-to-stdout": "gorun keeps each rank's standard error on its own; run gorun ... 2>&1 to merge them",
	"v":                      "did you mean --version or --verbose? (see gorun --help)",
	"N":                      "Open MPI's -N is ranks per host: give --npernode N with -H or --hostfile",
	"ppn":                    "MPICH's -ppn is ranks per host: give --npernode N with -H or --hostfile",
	"c":                      "give -np N for the number of ranks",
	"f":                      "MPICH's -f is the hostfile: give --hostfile FILE",
	"hosts":                  "give the hosts as -H host1,host2 (or --host)",
	"V":                      "did you mean --version? (see gorun --help)",
}

// lookupFlag returns the flag named name (or aliased so), or nil.
func lookupFlag(name string, fs []cli.Flag) cli.Flag {
	for _, f := range fs {
		for _, n := range f.Names() {
			if n == name {
				return f
			}
		}
	}
	return nil
}

// closest returns the visible flag name nearest to name, if one is within
// two edits (one for names of up to four letters), else "".
func closest(name string, fs []cli.Flag) string {
	var names []string
	for _, f := range fs {
		if vf, ok := f.(cli.VisibleFlag); ok && !vf.IsVisible() {
			continue
		}
		names = append(names, f.Names()...)
	}
	return suggest.Closest(name, names)
}

// dashed writes a flag as gorun's help does: -np and one-letter flags with
// one dash, the rest with two.
func dashed(name string) string {
	if len(name) == 1 || name == flagNP {
		return "-" + name
	}
	return "--" + name
}
