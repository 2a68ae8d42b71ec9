package shm

import (
	"errors"
	"fmt"
	"os"
	"strings"
)

// Dir is where segments live: a tmpfs, so that they are memory, not disk.
const Dir = "/dev/shm"

// validJobID reports whether id is 1 to 64 letters, digits, '.', '_' or
// '-'. By hand, as isSegmentName: the two regexps they replace took 0.28
// ms of every rank's start and gorun's, compiled as the package loaded
// (GODEBUG=inittrace=1: 1058 allocations), the most of any package.
func validJobID(id string) bool {
	if len(id) < 1 || len(id) > 64 {
		return false
	}
	for _, c := range []byte(id) {
		if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// isSegmentName reports whether name is what follows "gorun-<jobid>-" in
// the name of a segment, of its doorbell or of a shared area (Share):
// r<rank>-<16 hex digits>, then .new or .bell or nothing; or s<16 hex
// digits>.
func isSegmentName(name string) bool {
	if hex, ok := strings.CutPrefix(name, "s"); ok {
		return isHex16(hex)
	}
	rest, ok := strings.CutPrefix(name, "r")
	if !ok {
		return false
	}
	rank, rest, ok := strings.Cut(rest, "-")
	if !ok || rank == "" || strings.Trim(rank, "0123456789") != "" {
		return false
	}
	for _, suffix := range []string{".new", ".bell"} {
		if h, ok := strings.CutSuffix(rest, suffix); ok {
			return isHex16(h)
		}
	}
	return isHex16(rest)
}

// isHex16 reports whether s is 16 lowercase hexadecimal digits.
func isHex16(s string) bool {
	return len(s) == 16 && strings.Trim(s, "0123456789abcdef") == ""
}

func isAlnum(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

func checkJobID(jobID string) error {
	if !validJobID(jobID) {
		return fmt.Errorf("shm: job id %q: want 1 to 64 letters, digits, '.', '_' or '-'", jobID)
	}
	return nil
}

// Cleanup removes every segment file of job jobID from Dir, whoever
// created it. Ranks unlink their segments as soon as every peer has mapped
// them, and Close removes what is left, but a rank that crashes before
// either leaves its file behind: the launcher calls Cleanup once the job
// has ended, however it ended, so that nothing of the job remains. Files
// of other jobs, even of one whose id extends this one's, are left alone.
func Cleanup(jobID string) error {
	return cleanupDir(Dir, jobID)
}

func cleanupDir(dir, jobID string) error {
	if err := checkJobID(jobID); err != nil {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("shm: cleanup of job %s: %w", jobID, err)
	}
	prefix := "gorun-" + jobID + "-"
	var errs []error
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !isSegmentName(rest) {
			continue
		}
		if err := os.Remove(dir + "/" + e.Name()); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("shm: cleanup of job %s: %w", jobID, err)
	}
	return nil
}
