package main

import (
	"io/fs"
	"strings"
	"testing"
)

// fakeFiles is a machine's /proc and /sys files.
type fakeFiles map[string]string

func (f fakeFiles) ReadFile(path string) ([]byte, error) {
	if s, ok := f[path]; ok {
		return []byte(s), nil
	}
	return nil, fs.ErrNotExist
}

const meminfo = "MemTotal:       24684092 kB\nMemFree:         1000000 kB\nMemAvailable:   16777216 kB\n" // 16 GiB available

// TestRankMemory: a rank's share is the least of MemAvailable and the
// cgroups' limits, over the host's ranks; no limit ("max", v1's huge
// number) is none, and a machine that says nothing gives 0.
func TestRankMemory(t *testing.T) {
	for _, tc := range []struct {
		name  string
		files fakeFiles
		ranks int
		want  int64
		where string
	}{
		{"meminfo alone", fakeFiles{"/proc/meminfo": meminfo}, 2, 8 << 30, "here MemAvailable 16.0 GiB over 2 ranks"},
		{"v2, limit above", fakeFiles{"/proc/meminfo": meminfo, "/proc/self/cgroup": "0::/job/rank\n",
			"/sys/fs/cgroup/job/rank/memory.max": "max\n", "/sys/fs/cgroup/job/memory.max": "4294967296\n"}, 1, 4 << 30,
			"here the cgroup limit 4.0 GiB in /sys/fs/cgroup/job/memory.max over 1 rank"},
		{"v2, no limit", fakeFiles{"/proc/meminfo": meminfo, "/proc/self/cgroup": "0::/\n", "/sys/fs/cgroup/memory.max": "max\n"}, 4, 4 << 30, "MemAvailable 16.0 GiB over 4 ranks"},
		{"v1", fakeFiles{"/proc/meminfo": meminfo, "/proc/self/cgroup": "5:cpu,cpuacct:/a\n4:memory:/a/b\n",
			"/sys/fs/cgroup/memory/a/b/memory.limit_in_bytes": "9223372036854771712\n", "/sys/fs/cgroup/memory/a/memory.limit_in_bytes": "2147483648\n",
			"/sys/fs/cgroup/cpu,cpuacct/a/memory.limit_in_bytes": "1"}, 2, 1 << 30, "the cgroup limit 2.0 GiB in /sys/fs/cgroup/memory/a/memory.limit_in_bytes over 2 ranks"},
		{"nothing", fakeFiles{}, 2, 0, ""},
	} {
		got, where := rankMemory(tc.files, tc.ranks)
		if got != tc.want || !strings.Contains(where, tc.where) {
			t.Errorf("%s: %d, %q; want %d, %q", tc.name, got, where, tc.want, tc.where)
		}
	}
}
