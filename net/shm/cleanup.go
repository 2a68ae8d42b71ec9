package shm

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Dir is where segments live: a tmpfs, so that they are memory, not disk.
const Dir = "/dev/shm"

var (
	jobIDPattern = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)
	// segmentName matches what follows "gorun-<jobid>-" in the name of a
	// segment, of its doorbell or of a shared area (Share).
	segmentName = regexp.MustCompile(`^(r[0-9]+-[0-9a-f]{16}(\.new|\.bell)?|s[0-9a-f]{16})$`)
)

func checkJobID(jobID string) error {
	if !jobIDPattern.MatchString(jobID) {
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
		if !ok || !segmentName.MatchString(rest) {
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
