package launch

import (
	"archive/tar"
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// preloadPrefix names the directories --preload makes on each host; an
// agent running from such a directory removes it when it exits.
const preloadPrefix = "gorun-preload-"

// preloadMark is the line the remote shell prints with the directory.
const preloadMark = "GORUN-PRELOAD "

// preloadScript makes a private temp dir, unpacks the tar on stdin into it
// and prints its name.
const preloadScript = `umask 077 && d=$(mktemp -d "${TMPDIR:-/tmp}/` + preloadPrefix + `XXXXXX") && tar -xf - -C "$d" && echo "` + preloadMark + `$d"`

// preload copies files (gorun first, named gorun there) to a new temporary
// directory on host t over remote, and returns the directory.
func preload(remote remote, t target, files []string) (string, error) {
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

// writeTar writes files as a tar archive of their base names, the first
// one named gorun.
func writeTar(w io.Writer, files []string) error {
	tw := tar.NewWriter(w)
	for i, path := range files {
		name := filepath.Base(path)
		if i == 0 {
			name = "gorun"
		}
		if err := addFile(tw, name, path); err != nil {
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

// preloadDir returns the directory the running gorun was preloaded to, or
// "" if it was not.
func preloadDir() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	dir := filepath.Dir(exe)
	if !strings.HasPrefix(filepath.Base(dir), preloadPrefix) {
		return ""
	}
	return dir
}
