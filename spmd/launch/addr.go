package launch

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Addresses: which local IP ranks and the seed listen on.
//
// With --iface the address is that interface's, with --net the local
// address inside that network; each host resolves them itself. Otherwise
// the launcher's seed binds the local address that routes to the hosts,
// and each agent binds its ranks to its address that routes to the seed:
// both found by "dialing" UDP, which sends no packet.

// pickAddr returns the local IP for iface, or inside cidr, or facing peer
// (an IP), in that order of preference; the first one set decides.
func pickAddr(iface, cidr, peer string) (string, error) {
	switch {
	case iface != "":
		return ifaceAddr(iface)
	case cidr != "":
		return netAddr(cidr)
	case peer != "":
		return routeTo(peer)
	}
	return "", fmt.Errorf("no interface, network or peer to choose an address by")
}

// ifaceAddr returns the first IPv4 address of the interface named name, or
// else its first global IPv6 address.
func ifaceAddr(name string) (string, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		have := interfaces()
		if have == "" {
			return "", fmt.Errorf("--iface %s: %w (see ip addr)", name, err)
		}
		return "", fmt.Errorf("--iface %s: no interface %s; this host has %s (see ip addr)", name, name, have)
	}
	addrs, err := ifi.Addrs()
	if err != nil {
		return "", fmt.Errorf("--iface %s: %w", name, err)
	}
	var v6 string
	for _, a := range addrs {
		p, ok := prefixOf(a)
		if !ok {
			continue
		}
		switch ip := p.Addr(); {
		case ip.Is4():
			return ip.String(), nil
		case v6 == "" && ip.IsGlobalUnicast():
			v6 = ip.String()
		}
	}
	if v6 != "" {
		return v6, nil
	}
	return "", fmt.Errorf("--iface %s: the interface has no usable IP address; this host has %s (see ip addr)", name, interfaces())
}

// interfaces lists this host's interfaces and their addresses for
// messages: "lo 127.0.0.1/8 ::1/128, eth0 10.0.0.5/24".
func interfaces() string {
	ifs, err := net.Interfaces()
	if err != nil {
		return ""
	}
	var list []string
	for _, i := range ifs {
		entry := i.Name
		if addrs, err := i.Addrs(); err == nil {
			for _, a := range addrs {
				entry += " " + a.String()
			}
		}
		list = append(list, entry)
	}
	return strings.Join(list, ", ")
}

// netAddr returns the first local address inside cidr.
func netAddr(cidr string) (string, error) {
	want, err := netip.ParsePrefix(cidr)
	if err != nil {
		return "", fmt.Errorf("--net %q: want a CIDR such as 10.0.0.0/8", cidr)
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return "", fmt.Errorf("--net %s: %w", cidr, err)
	}
	var have []string
	for _, a := range addrs {
		p, ok := prefixOf(a)
		if !ok {
			continue
		}
		if want.Contains(p.Addr()) {
			return p.Addr().String(), nil
		}
		have = append(have, p.String())
	}
	return "", fmt.Errorf("--net %s: no local address in it (have %s)", cidr, strings.Join(have, ", "))
}

func prefixOf(a net.Addr) (netip.Prefix, bool) {
	p, err := netip.ParsePrefix(a.String())
	if err != nil {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()), true
}

// routeTo returns the local IP the kernel would send from to reach peer. A
// UDP "connection" only consults the routing table: nothing is sent.
func routeTo(peer string) (string, error) {
	c, err := net.Dial("udp", net.JoinHostPort(peer, "9"))
	if err != nil {
		return "", fmt.Errorf("no route to %s: %w", peer, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

// hostIP resolves what an agent's host is reached at to an IP: an ssh
// destination through ssh -G (so that aliases of ~/.ssh/config and -F
// count), then DNS.
func hostIP(remote remote, t target) (string, error) {
	name := t.Dest
	if i := strings.LastIndexByte(name, '@'); i >= 0 {
		name = name[i+1:]
	}
	if remote.Mode == modeSSH && len(remote.Argv) > 0 && filepath.Base(remote.Argv[0]) == "ssh" {
		if h := sshHostname(remote.Argv, t.Dest); h != "" {
			name = h
		}
	}
	if remote.Mode == ModeSrun {
		name = t.Name
	}
	if _, err := netip.ParseAddr(name); err == nil {
		return name, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if remote.Mode == ModeSrun {
		// Slurm first: it knows its nodes' addresses, which DNS may not
		// (and a lookup of a node name DNS does not know goes out to
		// the resolver for nothing).
		if addr := slurmNodeAddr(ctx, name); addr != "" {
			return addr, nil
		}
	}
	ips, err := net.DefaultResolver.LookupHost(ctx, name)
	if err == nil && len(ips) > 0 {
		return ips[0], nil
	}
	return "", fmt.Errorf("cannot resolve %s: %v", name, err)
}

// slurmNodeAddr asks Slurm for a node's NodeAddr.
func slurmNodeAddr(ctx context.Context, node string) string {
	out, err := exec.CommandContext(ctx, "scontrol", "show", "node", "-o", node).Output()
	if err != nil {
		return ""
	}
	for _, f := range strings.Fields(string(out)) {
		if v, ok := strings.CutPrefix(f, "NodeAddr="); ok {
			if _, err := netip.ParseAddr(v); err == nil {
				return v
			}
			if ips, err := net.DefaultResolver.LookupHost(ctx, v); err == nil && len(ips) > 0 {
				return ips[0]
			}
		}
	}
	return ""
}

// sshHostname asks ssh -G which hostname it would connect to for dest.
func sshHostname(sshArgv []string, dest string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	args := append(append([]string{}, sshArgv[1:]...), "-G", dest)
	out, err := exec.CommandContext(ctx, sshArgv[0], args...).Output()
	if err != nil {
		return ""
	}
	return parseSSHConfigHostname(out)
}

// parseSSHConfigHostname finds "hostname X" in ssh -G output.
func parseSSHConfigHostname(out []byte) string {
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), " ")
		if ok && strings.EqualFold(k, "hostname") {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// sshServerAddr returns the server address of SSH_CONNECTION ("client-ip
// client-port server-ip server-port"): this host's address as ssh reached it.
func sshServerAddr(sshConnection string) string {
	f := strings.Fields(sshConnection)
	if len(f) != 4 {
		return ""
	}
	return f[2]
}

// sshClientAddr returns the client address of SSH_CONNECTION.
func sshClientAddr(sshConnection string) string {
	f := strings.Fields(sshConnection)
	if len(f) != 4 {
		return ""
	}
	return f[0]
}

// isLoopback says whether addr is a loopback address (127.0.0.0/8, ::1).
func isLoopback(addr string) bool {
	ip, err := netip.ParseAddr(addr)
	return err == nil && ip.IsLoopback()
}

// loopbackError says that --iface or --net chose a loopback address in a
// job whose other hosts cannot reach it.
func loopbackError(iface, cidr, addr string) error {
	flag := "--net " + cidr
	if iface != "" {
		flag = "--iface " + iface
	}
	return fmt.Errorf("%s: %s is a loopback address, which no other host reaches (have %s)", flag, addr, interfaces())
}
