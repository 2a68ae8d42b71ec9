package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-hpc/gorun/prims"
	"github.com/gorun-hpc/gorun/spmd/contract"
)

// gorun --tune writes a decision table that parses, and gorun --topo then
// shows the choices that come from it.
func TestTune(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tune.toml")
	env := contract.EnvTuneFile + "=" + path
	cmd := gorunCmd(t, "--tune", "-np", "2", "--tune-sizes", "8-1K")
	cmd.Env = append(cmd.Env, env)
	r := runGorun(t, cmd)
	if r.code != 0 || !strings.Contains(r.stdout, "model agreement:") || !strings.Contains(r.stdout, "written to "+path) {
		t.Fatalf("gorun --tune:\n%s", r)
	}
	f, err := prims.ReadTuneFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tables) != 1 || f.Tables[0].Ranks() != 2 || len(f.Tables[0].Rules) == 0 {
		t.Fatalf("%s holds %+v", path, f.Tables)
	}
	cmd = gorunCmd(t, "--topo", "-np", "2")
	cmd.Env = append(cmd.Env, env)
	r = runGorun(t, cmd)
	if r.code != 0 || !strings.Contains(r.stdout, "(table)") || !strings.Contains(r.stdout, "decision table: "+path) {
		t.Fatalf("gorun --topo after --tune shows no choice from the table:\n%s", r)
	}
	// Another rank count is another key: the model decides.
	cmd = gorunCmd(t, "--topo", "-np", "3")
	cmd.Env = append(cmd.Env, env)
	if r = runGorun(t, cmd); r.code != 0 || strings.Contains(r.stdout, "(table)") {
		t.Fatalf("gorun --topo -np 3 with a table for 2 ranks:\n%s", r)
	}
}

func TestTuneUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--tune", "-np", "2", "hostname"},
		{"--tune", "--topo", "-np", "2"},
		{"--tune", "-np", "2", "--tune-sizes", "1K-8"},
		{"--tune", "-np", "2", "--tune-sizes", "big"},
		{"--tune-sizes", "8-1K", "-np", "2", "hostname"},
	} {
		if r := gorun(t, "", args...); r.code != 2 {
			t.Errorf("gorun %s: want a usage error:\n%s", strings.Join(args, " "), r)
		}
	}
}
