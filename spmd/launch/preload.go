package launch

import (
	"archive/tar"
	"bufio"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
)

// preloadPrefix names the directories --preload makes on each host; the
// agent that a directory was made for removes it when it exits.
const preloadPrefix = "gorun-preload-"

// preloadMark is the line the remote shell prints with the directory.
const preloadMark = "GORUN-PRELOAD "

// preloadScript makes a private temp dir, unpacks the tar on stdin into it
// and prints its name.
const preloadScript = `umask 077 && d=$(mktemp -d "${TMPDIR:-/tmp}/` + preloadPrefix + `XXXXXX") && tar -xf - -C "$d" && echo "` + preloadMark + `$d"`

// preloadGorun is gorun's name in a preload directory.
const preloadGorun = "gorun"

// preloadFile is a file copied to each host: its path here and its name
// in the host's preload directory (slash-separated, relative).
type preloadFile struct {
	Name, Path string
}

// preloadPrograms names the programs of an MPMD job's contexts in a
// preload directory: each in a directory of its own, numbered by its
// context from 1, under its base name ("1/prog", "2/prog"), so that
// programs of one base name from different directories keep apart. A
// program that an earlier context runs too is copied once; "" is not
// copied. It returns the files to copy and, by path, the name of each.
func preloadPrograms(programs []string) ([]preloadFile, map[string]string) {
	var files []preloadFile
	names := map[string]string{}
	for i, p := range programs {
		if _, ok := names[p]; ok || p == "" {
			continue
		}
		names[p] = strconv.Itoa(i+1) + "/" + filepath.Base(p)
		files = append(files, preloadFile{Name: names[p], Path: p})
	}
	return files, names
}

// preload copies files to a new temporary directory on host t over
// remote, and returns the directory.
func preload(remote remote, t target, files []preloadFile) (string, error) {
	argv := remote.Command(t.Name, t.Dest, []string{"sh", "-c", preloadScript})
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.SysProcAttr = sysProcAttr()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	pr, pw := io.Pipe()
	cmd.Stdin = pr
	go func() { pw.CloseWithError(writeTar(pw, files)) }()
	err := cmd.Run()
	pr.Close()
	if err != nil {
		return "", fmt.Errorf("--preload to %s: %s %v: %s", t.Name, filepath.Base(argv[0]), err, strings.TrimSpace(stderr.String()))
	}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		if dir, ok := strings.CutPrefix(sc.Text(), preloadMark); ok && filepath.IsAbs(dir) {
			return dir, nil
		}
	}
	return "", fmt.Errorf("--preload to %s: the remote shell did not name its directory: %q", t.Name, trim(stdout.Bytes(), 200))
}

// hasGorun says whether files copy gorun itself.
func hasGorun(files []preloadFile) bool {
	for _, f := range files {
		if f.Name == preloadGorun {
			return true
		}
	}
	return false
}

// writeTar writes files as a tar archive of their names, with the
// directories they are in.
func writeTar(w io.Writer, files []preloadFile) error {
	tw := tar.NewWriter(w)
	dirs := map[string]bool{}
	for _, f := range files {
		if d := path.Dir(f.Name); d != "." && !dirs[d] {
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Name: d + "/", Mode: 0o700, Typeflag: tar.TypeDir}); err != nil {
				return err
			}
		}
		if err := addFile(tw, f.Name, f.Path); err != nil {
			return err
		}
	}
	return tw.Close()
}

func addFile(tw *tar.Writer, name, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o700, Size: fi.Size(), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err = io.Copy(tw, f)
	return err
}

// preloadFiles lists what an agent copies on to its children: every file
// of its preload directory dir, under the same names.
func preloadFiles(dir string) []preloadFile {
	var files []preloadFile
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if rel, err := filepath.Rel(dir, p); err == nil {
				files = append(files, preloadFile{Name: filepath.ToSlash(rel), Path: p})
			}
		}
		return nil
	})
	return files
}

// isPreloadDir says whether dir, which a setup names, is a directory that
// preload makes: an agent removes it at its end.
func isPreloadDir(dir string) bool {
	return filepath.IsAbs(dir) && strings.HasPrefix(filepath.Base(dir), preloadPrefix)
}
