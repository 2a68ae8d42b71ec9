package spmd

import (
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/spmd/contract"
)

func TestReadEnv(t *testing.T) {
	base := map[string]string{contract.EnvRank: "1", contract.EnvSize: "4"}
	read := func(extra map[string]string) (Env, error) {
		return ReadEnv(func(k string) string {
			if v, ok := extra[k]; ok {
				return v
			}
			return base[k]
		})
	}
	e, err := read(nil)
	if err != nil || e.Rank != 1 || e.Size != 4 || e.SingleCopy != -1 || e.Transport != "" || e.NoHugePages {
		t.Fatalf("defaults: %+v, %v", e, err)
	}
	e, err = read(map[string]string{contract.EnvSingleCopy: "0", contract.EnvTransport: "shm"})
	if err != nil || e.SingleCopy != 0 || e.Transport != "shm" {
		t.Fatalf("GORUN_SHM_SINGLE_COPY=0 GORUN_TRANSPORT=shm: %+v, %v", e, err)
	}
	if e, err = read(map[string]string{contract.EnvSingleCopy: "64K"}); err != nil || e.SingleCopy != 64<<10 {
		t.Fatalf("GORUN_SHM_SINGLE_COPY=64K: %+v, %v", e, err)
	}
	if e, err = read(map[string]string{contract.EnvHugePages: "0"}); err != nil || !e.NoHugePages {
		t.Fatalf("GORUN_SHM_HUGEPAGES=0: %+v, %v", e, err)
	}
	if e, err = read(map[string]string{contract.EnvHugePages: "1"}); err != nil || e.NoHugePages {
		t.Fatalf("GORUN_SHM_HUGEPAGES=1: %+v, %v", e, err)
	}
	for _, v := range []string{"1", "true", "0", "false"} {
		if _, err = read(map[string]string{contract.EnvCheckColls: v}); err != nil {
			t.Errorf("%s=%s: %v", contract.EnvCheckColls, v, err)
		}
	}
	for _, c := range []struct{ name, val, want string }{
		{contract.EnvHugePages, "off", "want 1 or 0"},
		{contract.EnvCheckColls, "yes", "want 1 or 0"},
		{contract.EnvSingleCopy, "-1", "want a byte count"},
		{contract.EnvSingleCopy, "64X", "want a byte count"},
		{contract.EnvTransport, "rdma", "want tcp or shm"},
		{contract.EnvInitTimeout, "soon", "positive duration"},
		{contract.EnvRank, "4", "want 0 <= rank < size"},
	} {
		_, err := read(map[string]string{c.name: c.val})
		if err == nil || !strings.Contains(err.Error(), c.name) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s=%s: error %v, want one naming the variable and saying %q", c.name, c.val, err, c.want)
		}
	}
}
