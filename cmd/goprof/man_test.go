package main

import (
	"flag"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/cmd/internal/manpage"
)

var update = flag.Bool("update", false, "rewrite man/goprof.1 and the golden files")

const (
	manSource = "../../man/goprof.1.in"
	manPage   = "../../man/goprof.1"
	manMarker = `.\" @COMMANDS@` + "\n"
)

// TestManPage fails when man/goprof.1 is not what the app and goprof.1.in
// make, or misses a command or a flag; -update rewrites it.
func TestManPage(t *testing.T) {
	src, err := os.ReadFile(manSource)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(src), manMarker) {
		t.Fatalf("%s has no %q line", manSource, manMarker)
	}
	app := newApp()
	cmds := ".\\\" The COMMANDS section is generated from the commands of cmd/goprof.\n.SH COMMANDS\n" + manpage.Commands(app, manpage.GNUDash)
	page := strings.Replace(string(src), manMarker, cmds, 1)
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
		t.Fatalf("%s is stale: run go test ./cmd/goprof -run TestManPage -update", manPage)
	}
	for _, c := range app.Commands {
		if !strings.Contains(page, ".SS goprof "+c.Name+"\n") {
			t.Errorf("command %s is missing from %s", c.Name, manPage)
		}
		for _, f := range c.VisibleFlags() {
			if !strings.Contains(page, manpage.GNUDash(f.Names()[0])) {
				t.Errorf("flag %s of %s is missing from %s", f.Names()[0], c.Name, manPage)
			}
		}
	}
	if mandoc, err := exec.LookPath("mandoc"); err == nil {
		out, err := exec.Command(mandoc, "-Tlint", "-W", "warning", manPage).CombinedOutput()
		if err != nil || len(out) > 0 {
			t.Errorf("mandoc -Tlint: %v\n%s", err, out)
		}
	}
}

// TestReadmeCommands fails when README.md's profiling section leaves out
// a goprof command that the man page (generated from the app) has.
func TestReadmeCommands(t *testing.T) {
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range newApp().Commands {
		if !strings.Contains(string(b), "go run ./cmd/goprof "+c.Name+" ") {
			t.Errorf("README.md shows no %q: add it to the Profiling section's examples", "go run ./cmd/goprof "+c.Name)
		}
	}
}
