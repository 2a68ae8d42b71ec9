package testhost

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// NeedRoot returns "" when the process runs as root, or else why the rig
// cannot run: "needs root to " + what, with the uid.
func NeedRoot(what string) string {
	if uid := os.Geteuid(); uid != 0 {
		return fmt.Sprintf("needs root to %s (running as uid %d)", what, uid)
	}
	return ""
}

// Provide installs packages when missing names a program the rig needs,
// and returns "" when nothing is missing afterwards, or else why the rig
// cannot run. installed names the packages in that reason.
func Provide(missing func() string, installed string, packages ...string) string {
	m := missing()
	if m == "" {
		return ""
	}
	if err := Install(packages...); err != nil {
		return fmt.Sprintf("%s missing and could not be installed: %v", m, err)
	}
	if m := missing(); m != "" {
		return fmt.Sprintf("%s missing after installing %s", m, installed)
	}
	return ""
}

// Install installs Debian packages with apt-get, without recommends,
// updating the package lists first when the install fails. It needs root.
func Install(packages ...string) error {
	args := append([]string{"-o", "DPkg::Lock::Timeout=120", "install", "-y", "--no-install-recommends"}, packages...)
	if apt(args...) == nil {
		return nil
	}
	if err := apt("-o", "DPkg::Lock::Timeout=120", "update"); err != nil {
		return err
	}
	return apt(args...)
}

// apt runs apt-get, without questions, and returns its error with the last
// line of its output.
func apt(args ...string) error {
	cmd := exec.Command("apt-get", args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("apt-get %s: %v: %s", args[len(args)-1], err, lastLine(out))
	}
	return nil
}

func lastLine(out []byte) string {
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1]
}
