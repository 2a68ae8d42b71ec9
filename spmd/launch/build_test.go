package launch

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestSweepBuildDirs: a sweep removes the build directories whose gorun
// has ended (their lock free), and leaves those of a running gorun, those
// named as before the lock (an older gorun's, maybe running), another
// user's, and anything else.
func TestSweepBuildDirs(t *testing.T) {
	tmp := t.TempDir()
	mk := func(name string) string {
		dir := filepath.Join(tmp, name)
		if err := os.Mkdir(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(filepath.Join(dir, "prog"), []byte("x"), 0o755)
		return dir
	}
	dead := mk("gorun-build-999999-123")
	old := mk("gorun-build-4567")
	other := mk("gorun-build-1-2x")
	running, lock, err := newBuildDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if want := "gorun-build-" + strconv.Itoa(os.Getpid()) + "-"; !strings.HasPrefix(filepath.Base(running), want) || !buildDirName.MatchString(filepath.Base(running)) {
		t.Errorf("build directory %s, want %s* matching %v", running, want, buildDirName)
	}
	keep := []string{running, old, other}
	if os.Geteuid() == 0 {
		theirs := mk("gorun-build-999998-456")
		if err := os.Chown(theirs, 65534, 65534); err != nil {
			t.Fatal(err)
		}
		keep = append(keep, theirs)
	}
	// A link to a dead one's directory is not a directory of its own.
	os.Symlink(mk("target"), filepath.Join(tmp, "gorun-build-999997-789"))
	keep = append(keep, filepath.Join(tmp, "gorun-build-999997-789"))

	sweepBuildDirs(tmp)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("%s, whose lock is free, is still there (%v)", dead, err)
	}
	for _, dir := range keep {
		if _, err := os.Lstat(dir); err != nil {
			t.Errorf("%s was removed: %v", dir, err)
		}
	}
	// Its gorun ended: the lock is free, and the next sweep takes it.
	lock.Close()
	sweepBuildDirs(tmp)
	if _, err := os.Stat(running); !os.IsNotExist(err) {
		t.Errorf("%s, unlocked, is still there (%v)", running, err)
	}
}

// TestBuildDirLock: the lock that newBuildDir holds keeps a sweep's off,
// and sameDir, which both check after locking, tells a directory removed
// meanwhile.
func TestBuildDirLock(t *testing.T) {
	tmp := t.TempDir()
	dir, lock, err := newBuildDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if !sameDir(dir, lock) {
		t.Fatalf("%s is not the directory locked", dir)
	}
	// Another open of it cannot take the lock while the maker holds it.
	f, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err == nil {
		t.Fatal("a second lock of a held build directory was taken")
	}
	os.Remove(dir)
	if sameDir(dir, lock) {
		t.Error("sameDir of a removed directory")
	}
}
