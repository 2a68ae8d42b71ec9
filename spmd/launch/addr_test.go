package launch

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestPickAddr(t *testing.T) {
	lo := loopbackName(t)
	for _, tc := range []struct {
		name, iface, cidr, peer string
		want                    string
	}{
		{"iface", lo, "", "", "127.0.0.1"},
		{"net", "", "127.0.0.0/8", "", "127.0.0.1"},
		{"route", "", "", "127.0.0.1", "127.0.0.1"},
		{"iface wins over the peer", lo, "", "192.0.2.1", "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := pickAddr(tc.iface, tc.cidr, tc.peer)
			if err != nil || got != tc.want {
				t.Errorf("pickAddr(%q, %q, %q) = %q, %v; want %q", tc.iface, tc.cidr, tc.peer, got, err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ iface, cidr, peer, msg string }{
		{"nosuch0", "", "", "--iface nosuch0"},
		{"", "203.0.113.0/24", "", "no local address in it"},
		{"", "bogus", "", "want a CIDR"},
		{"", "", "", "no interface"},
	} {
		if _, err := pickAddr(tc.iface, tc.cidr, tc.peer); err == nil || !strings.Contains(err.Error(), tc.msg) {
			t.Errorf("pickAddr(%q, %q, %q) = %v; want an error with %q", tc.iface, tc.cidr, tc.peer, err, tc.msg)
		}
	}
}

func loopbackName(t *testing.T) string {
	ifs, err := net.Interfaces()
	if err != nil {
		t.Skip(err)
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			return i.Name
		}
	}
	t.Skip("no loopback interface")
	return ""
}

func TestSSHConnection(t *testing.T) {
	c := "198.18.0.1 52114 198.18.0.3 22"
	if got := sshServerAddr(c); got != "198.18.0.3" {
		t.Errorf("server address %q", got)
	}
	if got := sshClientAddr(c); got != "198.18.0.1" {
		t.Errorf("client address %q", got)
	}
	if sshServerAddr("") != "" || sshClientAddr("1 2 3") != "" {
		t.Error("malformed SSH_CONNECTION gave an address")
	}
}

func TestParseSSHConfigHostname(t *testing.T) {
	out := "user root\nhostname 198.18.7.2\nport 22\n"
	if got := parseSSHConfigHostname([]byte(out)); got != "198.18.7.2" {
		t.Errorf("hostname %q", got)
	}
	if got := parseSSHConfigHostname([]byte("port 22\n")); got != "" {
		t.Errorf("no hostname line gave %q", got)
	}
}

func TestHostIP(t *testing.T) {
	r := remote{Mode: modeSSH, Argv: []string{"rsh"}}
	if ip, err := hostIP(r, target{Name: "n", Dest: "bob@127.0.0.1"}); err != nil || ip != "127.0.0.1" {
		t.Errorf("hostIP of bob@127.0.0.1 = %q, %v", ip, err)
	}
	// Inside Slurm, scontrol's NodeAddr first; DNS (here /etc/hosts) where
	// it has none. A fake scontrol: the real one, without a slurm.conf,
	// asks DNS for its controller.
	dir := t.TempDir()
	scontrol := "#!/bin/sh\n[ \"$4\" = n7 ] && echo NodeName=n7 NodeAddr=198.18.7.7 State=IDLE && exit 0\nexit 1\n"
	if err := os.WriteFile(filepath.Join(dir, "scontrol"), []byte(scontrol), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", dir+":"+os.Getenv("PATH"))
	if ip, err := hostIP(remote{Mode: ModeSrun}, target{Name: "n7", Dest: "x"}); err != nil || ip != "198.18.7.7" {
		t.Errorf("hostIP of srun node n7 = %q, %v; want scontrol's NodeAddr 198.18.7.7", ip, err)
	}
	if ip, err := hostIP(remote{Mode: ModeSrun}, target{Name: "localhost", Dest: "x"}); err != nil || net.ParseIP(ip) == nil {
		t.Errorf("hostIP of srun node localhost = %q, %v", ip, err)
	}
}

// TestLauncherAddr: an --iface or --net that matches nothing on the
// launcher falls back to its address facing the hosts, with a notice
// naming the flag and the address (the seed listened on 127.0.0.1, and
// remote ranks waited for it until their init timeout); where no host
// can be routed to either, it is a usage error.
func TestLauncherAddr(t *testing.T) {
	r := remote{Mode: modeSSH, Argv: []string{"rsh"}}
	here := []target{{Index: 1, Name: "h1", Dest: "127.0.0.2"}}
	nowhere := []target{{Index: 1, Name: "h1", Dest: "fe80::1"}} // link-local, no zone: no route
	for _, tc := range []struct {
		name, iface, cidr string
		targets           []target
		addr, notice, err string
	}{
		{"route", "", "", here, "127.0.0.1", "", ""},
		{"net here", "", "127.0.0.0/8", here, "127.0.0.1", "", ""},
		{"net not here", "", "203.0.113.0/24", here, "127.0.0.1",
			`--net 203.0.113.0/24: no local address in it \(have .*\); the launcher listens on 127.0.0.1 instead, its address that routes to host h1, as without --net \(the hosts still choose theirs by --net\)`, ""},
		{"iface not here", "nosuch0", "", here, "127.0.0.1",
			`--iface nosuch0: no interface nosuch0; this host has .*; the launcher listens on 127.0.0.1 instead, its address that routes to host h1, as without --iface \(the hosts still choose theirs by --iface\)`, ""},
		{"net not here, no route", "", "203.0.113.0/24", nowhere, "", "",
			"--net 203.0.113.0/24: no local address in it .*; nor is there a route to the hosts .*host h1.*: give a --net that this machine has"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig()
			cfg.Iface, cfg.Net = tc.iface, tc.cidr
			addr, notice, err := launcherAddr(&cfg, r, tc.targets)
			if addr != tc.addr || !matches(tc.notice, notice) || !matches(tc.err, errString(err)) {
				t.Errorf("launcherAddr = %q, notice %q, error %v; want %q, %q, %q", addr, notice, err, tc.addr, tc.notice, tc.err)
			}
			if tc.err != "" && !errors.Is(err, ErrUsage) {
				t.Errorf("%v is no usage error", err)
			}
		})
	}
}

// matches says whether s matches the regexp re, anchored; "" matches "".
func matches(re, s string) bool {
	if re == "" || s == "" {
		return re == s
	}
	return regexp.MustCompile(`^` + re + `$`).MatchString(s)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
