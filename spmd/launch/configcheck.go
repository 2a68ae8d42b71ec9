package launch

// The checks of each setting's value, shared by the flags (Validate) and
// the config file (checkValues).

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/gorun-hpc/gorun/spmd/contract"
	"github.com/gorun-hpc/gorun/spmd/launch/hosts"
)

// valueChecks check the value of one setting each, named by its flag and
// its config key: Validate reports "--flag <error>", a config file
// "FILE:LINE: key <error>". Each error starts with the value.
var valueChecks = []struct {
	flag, key string
	check     func(c *Config) error
}{
	{"-np", "np", func(c *Config) error {
		if c.NP > MaxRanks {
			return fmt.Errorf("%d: at most %d ranks in one job", c.NP, MaxRanks)
		}
		if c.NP >= 0 {
			return nil
		}
		prog := c.Program
		if prog == "" {
			prog = "./prog"
		}
		return fmt.Errorf("%d: want at least 1 rank, as in gorun -np 4 %s (or give a host list)", c.NP, prog)
	}},
	{"-x", "export", func(c *Config) error {
		for _, x := range c.Export {
			name, _, _ := strings.Cut(x, "=")
			if !validVarName(name) {
				return fmt.Errorf("%q: want VAR or VAR=VALUE, VAR letters, digits and _, not starting with a digit", x)
			}
			if isContractVar(name) {
				return fmt.Errorf("%s: gorun sets %s for each rank itself", name, name)
			}
		}
		return nil
	}},
	{"--stdin", "stdin", func(c *Config) error {
		switch c.Stdin {
		case "", "none", "all":
			return nil
		}
		if n, err := strconv.Atoi(c.Stdin); err != nil || n < 0 {
			return fmt.Errorf("%q: want none, all, or a rank number", c.Stdin)
		}
		return nil // StdinRank checks the rank against -np
	}},
	{"--map-by", "map_by", func(c *Config) error {
		if _, err := hosts.ParsePolicy(c.MapBy); c.MapBy == "" || err == nil {
			return nil
		}
		if m, _, _ := strings.Cut(c.MapBy, ":"); m == "core" || m == "hwthread" || m == "socket" || m == "package" || m == "numa" || m == "ppr" {
			return fmt.Errorf("%q: want slot or node (gorun places ranks on hosts only; --bind-to core or socket binds each host's ranks in turn)", c.MapBy)
		}
		return fmt.Errorf("%q: want slot or node", c.MapBy)
	}},
	{"--bind-to", "bind_to", func(c *Config) error {
		_, err := parseBindPolicy(c.BindTo)
		return err
	}},
	{"--timer-slack", "timer_slack", func(c *Config) error {
		_, err := parseTimerSlack(c.TimerSlack)
		return err
	}},
	{"--npernode", "npernode", func(c *Config) error {
		if c.NPerNode == 0 && c.given("npernode") {
			return fmt.Errorf("0: want a positive count (left out, hosts get ranks up to their slots)")
		}
		return negative(c.NPerNode, "want a positive count")
	}},
	{"--spawn-radix", "spawn_radix", func(c *Config) error {
		if c.SpawnRadix < 1 {
			return fmt.Errorf("%d: want at least 1", c.SpawnRadix)
		}
		return nil
	}},
	{"--max-restarts", "max_restarts", func(c *Config) error {
		return negative(c.MaxRestarts, "want 0 or more")
	}},
	{"--timeout", "timeout", func(c *Config) error { return negativeDuration(c.Timeout) }},
	{"--kill-grace", "kill_grace", func(c *Config) error { return negativeDuration(c.KillGrace) }},
	{"--init-timeout", "init_timeout", func(c *Config) error {
		if c.InitTimeout == 0 && c.given("init_timeout") {
			return fmt.Errorf("0s: want a positive duration (left out, %v)", contract.DefaultInitTimeout)
		}
		for _, x := range c.Export {
			if name, _, _ := strings.Cut(x, "="); name == contract.EnvInitTimeout && c.InitTimeout > 0 {
				return fmt.Errorf("%v and -x %s both given: keep one (the flag sets the variable)", time.Duration(c.InitTimeout), x)
			}
		}
		return negativeDuration(c.InitTimeout)
	}},
	{"--connect-timeout", "connect_timeout", func(c *Config) error { return negativeDuration(c.ConnectTimeout) }},
	{"--agent-timeout", "agent_timeout", func(c *Config) error {
		if t := time.Duration(c.AgentTimeout); t > 0 && t < minAgentTimeout {
			return fmt.Errorf("%v: want 0 (no limit) or at least %v", t, minAgentTimeout)
		}
		return negativeDuration(c.AgentTimeout)
	}},
	{"--net", "net", func(c *Config) error {
		if _, err := netip.ParsePrefix(c.Net); c.Net != "" && err != nil {
			return fmt.Errorf("%q: want a CIDR such as 10.0.0.0/8", c.Net)
		}
		return nil
	}},
	{"--ports", "ports", func(c *Config) error {
		if c.Ports == "" {
			return nil
		}
		_, err := contract.ParsePortRange(c.Ports)
		return err
	}},
	{"--ssh-args", "ssh_args", func(c *Config) error {
		if _, err := splitShell(c.SSHArgs); err != nil {
			return fmt.Errorf("%q: %v", c.SSHArgs, err)
		}
		return nil
	}},
	{"--launch-agent", "launch_agent", func(c *Config) error {
		if _, err := splitShell(c.LaunchAgent); err != nil {
			return fmt.Errorf("%q: %v", c.LaunchAgent, err)
		}
		return nil
	}},
}

// validVarName says whether name is a variable name a shell would take:
// letters, digits and _, not starting with a digit.
func validVarName(name string) bool {
	for i, c := range name {
		switch {
		case c == '_', 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case '0' <= c && c <= '9' && i > 0:
		default:
			return false
		}
	}
	return name != ""
}

// negative is the error "n: want" where n < 0, else nil.
func negative(n int, want string) error {
	if n >= 0 {
		return nil
	}
	return fmt.Errorf("%d: %s", n, want)
}

func negativeDuration(d Duration) error {
	if d < 0 {
		return fmt.Errorf("%v: must not be negative", time.Duration(d))
	}
	return nil
}
