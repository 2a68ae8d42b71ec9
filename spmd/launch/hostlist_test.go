package launch

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

// dryRun runs the launcher with --dry-run and the environment env.
func dryRun(t *testing.T, cfg Config, env map[string]string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	l := &Launcher{Stdout: &out, Stderr: &out, Getenv: func(k string) string { return env[k] }}
	cfg.DryRun, cfg.Program = true, "/bin/true"
	_, err := l.Run(context.Background(), cfg)
	return out.String(), err
}

func TestHostListDryRun(t *testing.T) {
	dir := t.TempDir()
	hf := filepath.Join(dir, "hosts")
	os.WriteFile(hf, []byte("# cluster\nn1 slots=2\nn2:2\n"), 0o644)
	slurm := map[string]string{"SLURM_JOB_NODELIST": "node[1-2]", "SLURM_TASKS_PER_NODE": "2(x2)"}
	for _, tc := range []struct {
		name string
		set  func(*Config)
		env  map[string]string
		want []string
	}{
		{"-H by slot", func(c *Config) { c.Hosts, c.NP = "a:2,b:2", 3 }, nil,
			[]string{"host a (ssh): ranks 0-1\nhost b (ssh): ranks 2\n", "rank 2: host b, node 1, local rank 0", "GORUN_HOST_ID=b", "GORUN_NODE_COUNT=2"}},
		{"-H by node", func(c *Config) { c.Hosts, c.NP, c.MapBy = "a:2,b:2", 4, "node" }, nil,
			[]string{"host a (ssh): ranks 0,2\nhost b (ssh): ranks 1,3\n"}},
		{"hostfile, one rank per slot", func(c *Config) { c.Hostfile = hf }, nil,
			[]string{"host n1 (ssh): ranks 0-1\nhost n2 (ssh): ranks 2-3\n", "4 ranks"}},
		{"npernode", func(c *Config) { c.Hostfile, c.NPerNode = hf, 1 }, nil,
			[]string{"host n1 (ssh): ranks 0\nhost n2 (ssh): ranks 1\n"}},
		{"oversubscribe", func(c *Config) { c.Hosts, c.NP, c.Oversubscribe = "a,b", 4, true }, nil,
			[]string{"host a (ssh): ranks 0-1\nhost b (ssh): ranks 2-3\n"}},
		{"slurm", func(c *Config) {}, slurm,
			[]string{"host node1 (srun): ranks 0-1\nhost node2 (srun): ranks 2-3\n", "GORUN_HOST_ID=node2"}},
		{"-H wins over slurm", func(c *Config) { c.Hosts = "x:1" }, slurm,
			[]string{"host x (ssh): ranks 0\n"}},
		// The user ssh logs in as (it showed "host a (ssh)").
		{"-H user@host", func(c *Config) { c.Hosts, c.NP = "alice@a:2,b:1", 3 }, nil,
			[]string{"host a (ssh alice@a): ranks 0-1\nhost b (ssh): ranks 2\n"}},
		{"localhost is local", func(c *Config) { c.Hosts, c.NP = "localhost:2,b:1", 3 }, nil,
			[]string{"host localhost (local): ranks 0-1\nhost b (ssh): ranks 2\n"}},
		// Were two hosts: each bound its ranks to the same cores.
		{"this machine's names are one host", func(c *Config) { c.Hosts = "localhost:2,b:1,127.0.0.1:2" }, nil,
			[]string{"host localhost (local): ranks 0-3\nhost b (ssh): ranks 4\n", "GORUN_LOCAL_SIZE=4", "GORUN_NODE_COUNT=2"}},
		{"ports", func(c *Config) { c.Hosts, c.Ports = "a:1", "40000-40010" }, nil,
			[]string{"GORUN_PORTS=40000-40010"}},
		// The environment the ranks get: it lacked GORUN_STATUS_FD, and
		// showed a MASTER_PORT that the launch then chose anew.
		{"what the start sets", func(c *Config) { c.NP = 1 }, nil,
			[]string{"GORUN_STATUS_FD=4\n", "MASTER_PORT=<a free port, chosen at launch>\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.set(&cfg)
			out, err := dryRun(t, cfg, tc.env)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("dry run lacks %q:\n%s", w, out)
				}
			}
		})
	}
}

func TestHostListErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad")
	os.WriteFile(bad, []byte("n1 slots=2\nn2 slots=two\n"), 0o644)
	for _, tc := range []struct {
		name string
		set  func(*Config)
		want string
	}{
		{"malformed hostfile line", func(c *Config) { c.Hostfile = bad }, bad + ":2"},
		{"missing hostfile", func(c *Config) { c.Hostfile = filepath.Join(dir, "none") }, "--hostfile"},
		{"too many ranks", func(c *Config) { c.Hosts, c.NP = "a:2,b:2", 5 }, "5 ranks requested but the host list has 4 slots on 2 hosts"},
		{"bad -H", func(c *Config) { c.Hosts, c.NP = "a:x", 1 }, "-H a:x"},
		{"both lists", func(c *Config) { c.Hosts, c.Hostfile = "a", bad }, "-H and --hostfile"},
		{"bad map-by", func(c *Config) { c.Hosts, c.MapBy = "a", "core" }, "--map-by"},
		{"bad ports", func(c *Config) { c.Hosts, c.Ports = "a", "9-1" }, "--ports"},
		{"no ranks, no hosts", func(c *Config) { c.NP = 0 }, "-np 0: want at least 1 rank"},
		{"bad net", func(c *Config) { c.Hosts, c.Net = "a", "10.0.0.0" }, "--net"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.set(&cfg)
			_, err := dryRun(t, cfg, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !errors.Is(err, ErrUsage) {
				t.Errorf("err = %v; want a usage error with %q", err, tc.want)
			}
		})
	}
}

func TestHostConfigTOML(t *testing.T) {
	cfg := DefaultConfig()
	doc := `hosts = "a:2,b:2"
map_by = "node"
npernode = 1
oversubscribe = true
ssh_args = "-p 2222"
launch_agent = "rsh"
connect_timeout = "3s"
agent_timeout = "1m"
spawn_radix = 4
preload = true
net = "10.0.0.0/8"
ports = "40000-40100"
`
	if err := cfg.DecodeTOML("c.toml", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	want := Config{Hosts: "a:2,b:2", MapBy: "node", NPerNode: 1, Oversubscribe: true, SSHArgs: "-p 2222",
		LaunchAgent: "rsh", ConnectTimeout: Duration(3e9), AgentTimeout: Duration(time.Minute), SpawnRadix: 4, Preload: true, Net: "10.0.0.0/8", Ports: "40000-40100"}
	got := cfg
	got.Stdin, got.KillGrace, got.origin = "", 0, nil // origin: where the file set each key
	if !reflect.DeepEqual(got, want) {
		t.Errorf("decoded\n%+v\nwant\n%+v", got, want)
	}
}
