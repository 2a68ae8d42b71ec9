package launch

import (
	"errors"
	"fmt"
	"go/build"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/gorun-hpc/gorun/internal/suggest"
)

// Errors about the program, for errors.Is. gorun exits 127 for
// errNotFound, 126 for ErrNotExecutable, and 1 for ErrBuild.
var (
	errNotFound      = errors.New("program not found")
	ErrNotExecutable = errors.New("program not executable")
	ErrBuild         = errors.New("go build failed")
)

// program is the resolved PROGRAM of a command line.
type program struct {
	Path    string // absolute path of the executable; empty until built for a package
	Package string // absolute directory of a Go main package to build, or ""
	// Files are the package's Go files when it is outside any module; they
	// are built as a list of files, as "go run *.go" would.
	Files []string
}

// String is the path, or the package and "(built at launch)".
func (p program) String() string {
	if p.Path != "" {
		return p.Path
	}
	return p.Package + " (go package, built at launch)"
}

// resolveProgram finds name as a shell would: a name with a slash is a path
// (relative to the current directory), any other name is looked up on PATH.
// A directory holding a Go main package resolves to that package, which
// Build turns into an executable. wdir is --wdir, for the message of a
// name not on PATH.
func resolveProgram(name, wdir string) (program, error) {
	if !strings.Contains(name, "/") && name != "." && name != ".." {
		p, err := exec.LookPath(name)
		if err != nil {
			return program{}, errorf(errNotFound, "%s: not found on PATH (%s)%s", name, os.Getenv("PATH"), notOnPathHint(name, wdir))
		}
		abs, err := filepath.Abs(p)
		if err != nil {
			return program{}, err
		}
		return program{Path: abs}, nil
	}
	abs, err := filepath.Abs(name)
	if err != nil {
		return program{}, err
	}
	fi, err := os.Stat(abs)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return program{}, errorf(errNotFound, "%s: no such file or directory (looked at %s)", name, abs)
	case err != nil:
		return program{}, fmt.Errorf("%s: %w", name, err)
	case fi.IsDir():
		return goPackage(name, abs)
	case fi.Mode()&0o111 == 0 && strings.HasSuffix(name, ".go"):
		dir := filepath.Dir(name)
		if !filepath.IsAbs(dir) && dir != "." && dir != ".." && !strings.HasPrefix(dir, "../") {
			dir = "./" + dir
		}
		return program{}, errorf(ErrNotExecutable, "%s is a Go source file: give its package's directory, %s, and gorun builds it", name, dir)
	case fi.Mode()&0o111 == 0:
		return program{}, errorf(ErrNotExecutable, "%s: not executable; chmod +x it", abs)
	}
	if err := runnable(name, abs); err != nil {
		return program{}, err
	}
	return program{Path: abs}, nil
}

// notOnPathHint ends the message for name, not found on PATH: the path
// to give where the working directory has a file or directory of that
// name (or --wdir, wdir, has one: gorun looks for a path from its own
// working directory), else the nearest name of a program on PATH, where
// one is near.
func notOnPathHint(name, wdir string) string {
	if _, err := os.Stat(name); err == nil {
		return "; give a path such as ./" + name
	}
	if wdir != "" {
		if p := filepath.Join(wdir, name); p != name {
			if _, err := os.Stat(p); err == nil {
				return "; give a path such as " + p + " (a path is taken from gorun's working directory, not from --wdir)"
			}
		}
	}
	if near := nearestOnPath(name); near != "" {
		return "; did you mean " + near + "?"
	}
	return ""
}

// nearestOnPath returns the name of a program on PATH nearest to name
// (suggest.Closest), or "". It reads each directory of PATH once, without
// a stat per entry: it runs only for a name that is not there.
func nearestOnPath(name string) string {
	var names []string
	seen := map[string]bool{}
	for _, dir := range filepath.SplitList(os.Getenv("PATH")) {
		if dir == "" || dir == "." {
			continue // the working directory: said above, if it has name
		}
		entries, _ := os.ReadDir(dir)
		for _, e := range entries {
			if n := e.Name(); !e.IsDir() && !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	near := suggest.Closest(name, names)
	if near == "" {
		return ""
	}
	if _, err := exec.LookPath(near); err != nil {
		return "" // not executable, or a directory's symbolic link
	}
	return near
}

func goPackage(name, dir string) (program, error) {
	pkg, err := build.ImportDir(dir, 0)
	var noGo *build.NoGoError
	switch {
	case errors.As(err, &noGo):
		return program{}, errorf(ErrNotExecutable, "%s is a directory without Go files: give an executable or a Go main package", name)
	case err == nil && pkg.Name != "main":
		return program{}, errorf(ErrNotExecutable, "%s holds Go package %s, not package main: there is nothing to run", name, pkg.Name)
	}
	// On other errors, let the compiler say what is wrong.
	p := program{Package: dir}
	if !inModule(dir) {
		p.Files = append(pkg.GoFiles, pkg.CgoFiles...)
	}
	return p, nil
}

// inModule reports whether dir is inside a Go module or workspace.
func inModule(dir string) bool {
	for {
		for _, f := range []string{"go.mod", "go.work"} {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				return true
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
}
