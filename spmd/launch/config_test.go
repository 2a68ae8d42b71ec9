package launch

import (
	"errors"
	"strings"
	"testing"
	"time"
)

func TestDecodeTOML(t *testing.T) {
	cfg := DefaultConfig()
	doc := `np = 4
export = ["A=1", "B"]
tag_output = true
timeout = "90s"
stdin = "all"
`
	if err := cfg.DecodeTOML("c.toml", []byte(doc)); err != nil {
		t.Fatal(err)
	}
	if cfg.NP != 4 || !cfg.TagOutput || cfg.Stdin != "all" || time.Duration(cfg.Timeout) != 90*time.Second ||
		len(cfg.Export) != 2 || time.Duration(cfg.KillGrace) != DefaultKillGrace {
		t.Fatalf("decoded %+v", cfg)
	}
}

func TestDecodeTOMLErrors(t *testing.T) {
	for _, tc := range []struct {
		name, doc, want string
	}{
		{"unknown key", "np = 2\nbogus = 1\n", `c.toml:2: unknown key "bogus"`},
		{"wrong type", "np = 2\n\ntag_output = \"yes\"\n", "c.toml:3: cannot decode TOML string into tag_output, which wants true or false"},
		{"number for a string", "stdin = 0\n", "c.toml:1: cannot decode TOML integer into stdin, which wants a string in quotes"},
		{"flag's spelling", "tag-output = true\n", `c.toml:1: unknown key "tag-output": did you mean tag_output?`},
		{"bad duration", "timeout = \"3x\"\n", `c.toml:1: "3x" is not a duration`},
		{"syntax", "np = 2\n[[x\n", "c.toml:2: "},
		// A TOML integer would be nanoseconds: 5 s meant, 5 ns taken.
		{"integer timeout", "np = 2\ntimeout = 5\n", `c.toml:2: timeout = 5: a duration is a string such as "30s"`},
		{"integer kill_grace", "kill_grace = 1\n", `c.toml:1: kill_grace = 1: a duration is a string`},
		{"float connect_timeout", "\nconnect_timeout = 1.5\n", `c.toml:2: connect_timeout = 1.5: a duration is a string`},
		{"array init_timeout", "init_timeout = [1]\n", `c.toml:1: init_timeout is an array: a duration is a string`},
		// A value a flag would refuse, by its key and line.
		{"bad bind_to", "np = 2\nbind_to = \"numa\"\n", `c.toml:2: bind_to "numa": want auto, none`},
		{"bad timer_slack", "\n\ntimer_slack = \"2s\"\n", `c.toml:3: timer_slack "2s": want auto, 0, or a duration`},
		{"bad map_by", "map_by = \"core\"\n", `c.toml:1: map_by "core": want slot or node (gorun places`},
		{"negative timeout", "timeout = \"-1s\"\n", `c.toml:1: timeout -1s: must not be negative`},
		{"spawn_radix 0", "spawn_radix = 0\n", `c.toml:1: spawn_radix 0: want at least 1`},
		{"short agent_timeout", "agent_timeout = \"100ms\"\n", `c.toml:1: agent_timeout 100ms: want 0 (no limit) or at least 1s`},
		{"bad ports", "ports = \"9-1\"\n", `c.toml:1: ports "9-1": want LOW-HIGH`},
		{"bad ssh_args", "ssh_args = \"-F 'x\"\n", `c.toml:1: ssh_args "-F 'x": unterminated '`},
		{"bad stdin", "stdin = \"foo\"\n", `c.toml:1: stdin "foo": want none, all, or a rank number`},
		{"bad export", "\nexport = [\"A B\"]\n", `c.toml:2: export "A B": want VAR or VAR=VALUE`},
		{"contract export", "export = [\"GORUN_RANK=3\"]\n", `c.toml:1: export GORUN_RANK: gorun sets GORUN_RANK for each rank itself`},
		{"negative np", "np = -1\n", `c.toml:1: np -1: want at least 1 rank`},
		{"huge np", "np = 99999999999\n", `c.toml:1: np 99999999999: at most 1048576 ranks in one job`},
		{"two host lists", "hosts = \"a:1\"\n\nhostfile = \"h\"\n", `c.toml:3: hosts and hostfile both set (lines 1 and 3): keep one`},
		{"the first bad one", "net = \"10.0.0.0\"\nnpernode = -1\n", `c.toml:1: net "10.0.0.0": want a CIDR`},
		{"npernode 0", "\nnpernode = 0\n", `c.toml:2: npernode 0: want a positive count`},
		{"init_timeout 0", "init_timeout = \"0s\"\n", `c.toml:1: init_timeout 0s: want a positive duration`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			err := cfg.DecodeTOML("c.toml", []byte(tc.doc))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("err = %v, want prefix %q", err, tc.want)
			}
			if !errors.Is(err, ErrUsage) {
				t.Errorf("err %v is not ErrUsage", err)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	ok := func() Config { c := DefaultConfig(); c.NP, c.Program = 2, "prog"; return c }
	for _, tc := range []struct {
		name   string
		change func(*Config)
		want   string // "" means valid
	}{
		{"valid", func(*Config) {}, ""},
		{"np -1", func(c *Config) { c.NP = -1 }, "-np -1"},
		{"np too many", func(c *Config) { c.NP = MaxRanks + 1 }, "at most 1048576 ranks"},
		{"np most", func(c *Config) { c.NP = MaxRanks }, ""},
		{"no program", func(c *Config) { c.Program = "" }, "no program"},
		{"stdin word", func(c *Config) { c.Stdin = "some" }, `--stdin "some"`},
		{"stdin rank too big", func(c *Config) { c.Stdin = "2" }, "only 2 ranks"},
		{"stdin all", func(c *Config) { c.Stdin = "all" }, ""},
		{"negative timeout", func(c *Config) { c.Timeout = -1 }, "negative"},
		{"export empty name", func(c *Config) { c.Export = []string{"=x"} }, "-x"},
		{"export contract var", func(c *Config) { c.Export = []string{"GORUN_RANK=3"} }, "gorun sets GORUN_RANK"},
		{"export algo", func(c *Config) { c.Export = []string{"GORUN_ALGO=ring"} }, ""},
		// A zero that also means "left out" is refused where it was given.
		{"npernode 0 left out", func(c *Config) {}, ""},
		{"npernode 0 given", func(c *Config) { c.SetByFlag("npernode") }, "--npernode 0: want a positive count"},
		{"init-timeout 0 given", func(c *Config) { c.SetByFlag("init-timeout") }, "--init-timeout 0s: want a positive duration (left out, 1m0s)"},
		{"init-timeout twice", func(c *Config) {
			c.InitTimeout, c.Export = Duration(5*time.Second), []string{"GORUN_INIT_TIMEOUT=2s"}
		}, "--init-timeout 5s and -x GORUN_INIT_TIMEOUT=2s both given: keep one"},
		{"init-timeout by -x alone", func(c *Config) { c.Export = []string{"GORUN_INIT_TIMEOUT=2s"} }, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ok()
			tc.change(&c)
			err := c.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate = %v, want it to mention %q", err, tc.want)
			case err != nil && !errors.Is(err, ErrUsage):
				t.Fatalf("%v is not ErrUsage", err)
			}
		})
	}
}

func TestDefaultConfigPath(t *testing.T) {
	env := map[string]string{"XDG_CONFIG_HOME": "/x", "HOME": "/h"}
	if got := DefaultConfigPath(func(k string) string { return env[k] }); got != "/x/gorun/config.toml" {
		t.Errorf("with XDG_CONFIG_HOME: %s", got)
	}
	delete(env, "XDG_CONFIG_HOME")
	if got := DefaultConfigPath(func(k string) string { return env[k] }); got != "/h/.config/gorun/config.toml" {
		t.Errorf("with HOME: %s", got)
	}
}

func FuzzDecodeTOML(f *testing.F) {
	f.Add([]byte("np = 2\ntimeout = \"1s\"\n"))
	f.Add([]byte("[[x\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		cfg := DefaultConfig()
		if err := cfg.DecodeTOML("f.toml", b); err != nil && !errors.Is(err, ErrUsage) {
			t.Fatalf("error without ErrUsage: %v", err)
		}
	})
}
