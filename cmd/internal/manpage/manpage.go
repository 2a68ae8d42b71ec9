// Package manpage writes the generated parts of gorun's and goprof's man
// pages from their urfave/cli apps, so that a page never misses a flag:
// each command's test renders its page and compares it with the one
// checked in.
package manpage

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"
)

// Dash writes a flag's name as users type it.
type Dash func(name string) string

// MPIDash writes names of one or two letters with one dash, as mpirun's
// -np and -x, and longer ones with two: gorun's flags.
func MPIDash(name string) string {
	if len(name) <= 2 {
		return Roff("-" + name)
	}
	return Roff("--" + name)
}

// GNUDash writes one-letter names with one dash and the rest with two:
// goprof's flags.
func GNUDash(name string) string {
	if len(name) == 1 {
		return Roff("-" + name)
	}
	return Roff("--" + name)
}

// Flags writes flags as man(7) tagged paragraphs (.TP), each with its
// names, value placeholder, usage and default.
func Flags(flags []cli.Flag, dash Dash) string {
	var b strings.Builder
	for _, f := range flags {
		df, ok := f.(cli.DocGenerationFlag)
		if !ok {
			continue
		}
		placeholder, usage := UnquoteUsage(df.GetUsage())
		if df.TakesValue() && placeholder == "" {
			placeholder = "VALUE"
		}
		b.WriteString(".TP\n")
		for i, name := range f.Names() {
			if i > 0 {
				b.WriteString(", ")
			}
			fmt.Fprintf(&b, "\\fB%s\\fR", dash(name))
			if df.TakesValue() {
				fmt.Fprintf(&b, " \\fI%s\\fR", Roff(placeholder))
			}
		}
		b.WriteString("\n")
		b.WriteString(RoffLine(usage))
		if def := df.GetValue(); df.TakesValue() && def != "" && def != "0s" && def != "0" && def != `""` {
			fmt.Fprintf(&b, " (default: %s)", Roff(strings.Trim(def, `"`)))
		}
		b.WriteString(".\n")
	}
	return b.String()
}

// Commands writes each command as a subsection (.SS) with its synopsis,
// usage and flags.
func Commands(app *cli.App, dash Dash) string {
	var b strings.Builder
	for _, c := range app.VisibleCommands() {
		fmt.Fprintf(&b, ".SS %s %s\n", app.Name, c.Name)
		fmt.Fprintf(&b, ".B %s %s\n", app.Name, c.Name)
		if len(c.VisibleFlags()) > 0 {
			b.WriteString(".RI [ flags ]\n")
		}
		if c.ArgsUsage != "" {
			fmt.Fprintf(&b, ".I %s\n", Roff(c.ArgsUsage))
		}
		b.WriteString(".PP\n")
		b.WriteString(RoffLine(Sentence(c.Usage)) + "\n")
		b.WriteString(Flags(c.VisibleFlags(), dash))
	}
	return b.String()
}

// Sentence capitalizes s and ends it with a full stop.
func Sentence(s string) string {
	if s == "" {
		return s
	}
	s = strings.ToUpper(s[:1]) + s[1:]
	if !strings.HasSuffix(s, ".") {
		s += "."
	}
	return s
}

// UnquoteUsage splits "start `N` ranks" into "N" and "start N ranks", as
// urfave/cli does for --help.
func UnquoteUsage(usage string) (placeholder, text string) {
	i := strings.IndexByte(usage, '`')
	if i < 0 {
		return "", usage
	}
	j := strings.IndexByte(usage[i+1:], '`')
	if j < 0 {
		return "", usage
	}
	placeholder = usage[i+1 : i+1+j]
	return placeholder, usage[:i] + placeholder + usage[i+2+j:]
}

// Roff escapes text for a man page.
func Roff(s string) string {
	return strings.NewReplacer(`\`, `\e`, "-", `\-`).Replace(s)
}

// RoffLine escapes text that starts a line.
func RoffLine(s string) string {
	s = Roff(s)
	if strings.HasPrefix(s, ".") || strings.HasPrefix(s, "'") {
		s = `\&` + s
	}
	return s
}
