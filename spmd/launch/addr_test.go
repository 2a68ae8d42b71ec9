package launch

import (
	"net"
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
	if ip, err := hostIP(remote{Mode: ModeSrun}, target{Name: "localhost", Dest: "x"}); err != nil || net.ParseIP(ip) == nil {
		t.Errorf("hostIP of srun node localhost = %q, %v", ip, err)
	}
}
