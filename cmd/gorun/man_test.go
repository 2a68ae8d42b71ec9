package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/gorun-hpc/gorun/cmd/internal/manpage"
	"github.com/gorun-hpc/gorun/spmd/launch"
)

// The man page is man/gorun.1.in with its OPTIONS marker replaced by the
// flags of the app.
const (
	manSource = "../../man/gorun.1.in"
	manPage   = "../../man/gorun.1"
	manMarker = `.\" @OPTIONS@` + "\n"
)

// TestManPage fails when man/gorun.1 is not what the app and gorun.1.in
// make; -update rewrites it.
func TestManPage(t *testing.T) {
	src, err := os.ReadFile(manSource)
	if err != nil {
		t.Fatal(err)
	}
	page, err := renderMan(newApp(nil), string(src))
	if err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.WriteFile(manPage, []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(manPage)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != page {
		t.Fatalf("%s is stale: run go test ./cmd/gorun -run TestManPage -update", manPage)
	}
	// Every key a config file may set, as gorun.toml(5) lists them too
	// (max_restarts and profile_cpu were missing here).
	files := page[strings.Index(page, ".SH FILES"):]
	files = files[:strings.Index(files, ".TP\n.I hostfile")]
	t2 := reflect.TypeFor[launch.Config]()
	for i := range t2.NumField() {
		key, _, _ := strings.Cut(t2.Field(i).Tag.Get("toml"), ",")
		if key == "" || key == "-" {
			continue
		}
		if !regexpMatch(`(?m)^\.BR? `+regexp.QuoteMeta(strings.ReplaceAll(key, "-", `\-`))+`( ,)?$`, files) {
			t.Errorf("%s does not list config key %s under FILES", manPage, key)
		}
	}
	for _, f := range newApp(nil).VisibleFlags() {
		if !strings.Contains(page, manName(f.Names()[0])) {
			t.Errorf("flag %s is missing from %s", f.Names()[0], manPage)
		}
	}
	env := page[strings.Index(page, ".SH ENVIRONMENT"):]
	env = env[:strings.Index(env, ".SH EXIT STATUS")]
	for _, name := range contractVars(t) {
		if !regexpMatch(`(?m)^\.BR? (.* )?`+name+`\b`, env) {
			t.Errorf("%s does not list %s under ENVIRONMENT", manPage, name)
		}
	}
	if mandoc, err := exec.LookPath("mandoc"); err == nil {
		out, err := exec.Command(mandoc, "-Tlint", "-W", "warning", manPage).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("mandoc -Tlint: %v\n%s", err, out)
		}
	}
}

// renderMan puts the OPTIONS section of app into src at its marker.
func renderMan(app *cli.App, src string) (string, error) {
	if !strings.Contains(src, manMarker) {
		return "", fmt.Errorf("%s has no %q line", manSource, manMarker)
	}
	opts := ".\\\" The OPTIONS section is generated from the flags of cmd/gorun.\n.SH OPTIONS\n" + manpage.Flags(app.VisibleFlags(), manpage.MPIDash)
	return strings.Replace(src, manMarker, opts, 1), nil
}

func manName(name string) string { return manpage.MPIDash(name) }

// contractVars returns the values of the string constants of spmd/contract:
// every variable of the launcher-to-rank contract.
func contractVars(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../../spmd/contract/contract.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || len(vs.Values) != 1 {
			return true
		}
		if lit, ok := vs.Values[0].(*ast.BasicLit); ok && lit.Kind == token.STRING && strings.HasPrefix(vs.Names[0].Name, "Env") {
			s, _ := strconv.Unquote(lit.Value)
			names = append(names, s)
		}
		return true
	})
	if len(names) < 10 {
		t.Fatalf("found only %d variables in spmd/contract", len(names))
	}
	return names
}
