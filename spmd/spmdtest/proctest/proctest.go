package proctest

import (
	"bytes"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Build compiles each package, a path relative to the test's directory
// ("." for the program itself, "../../cmd/gorun" for the launcher), into
// a temporary directory and returns the programs' paths in the same
// order, each named after its directory. With -short it skips tb: these
// are the slow tests of real processes.
func Build(tb testing.TB, pkgs ...string) []string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("-short: skipping the jobs of real processes")
	}
	dir := tb.TempDir()
	bins := make([]string, len(pkgs))
	for i, pkg := range pkgs {
		abs, err := filepath.Abs(pkg)
		if err != nil {
			tb.Fatal(err)
		}
		bins[i] = filepath.Join(dir, filepath.Base(abs))
		if out, err := exec.Command("go", "build", "-o", bins[i], pkg).CombinedOutput(); err != nil {
			tb.Fatalf("building %s: %v\n%s", pkg, err, out)
		}
	}
	return bins
}

// Run runs prog with args on np ranks under gorun (with a 2-minute
// timeout), or alone when np is 0, and returns its standard output and
// error.
func Run(gorun, prog string, np int, args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(prog, args...)
	if np > 0 {
		cmd = exec.Command(gorun, append([]string{"-np", fmt.Sprint(np), "--timeout", "2m", prog}, args...)...)
	}
	cmd.WaitDelay = 10 * time.Second
	var errb bytes.Buffer
	cmd.Stderr = &errb
	out, err := cmd.Output()
	return string(out), errb.String(), err
}
