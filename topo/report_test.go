package topo

import (
	"strings"
	"testing"
)

// goldenModel is a fixed machine: loopback-like links inside a host, a
// 10 GbE-like network between hosts.
var goldenModel = Model{
	Local:  Link{Alpha: 10e-6, Beta: 1 / 2.5e9},
	Remote: Link{Alpha: 40e-6, Beta: 1 / 1.2e9},
	Gamma:  1 / 5e9,
	Cores:  8,

	LocalProbed: true, RemoteProbed: true,
}

// pulling is oversubscribed with single copy from 256 KiB inside a host.
func pulling() Model {
	m := oversubscribed()
	m.Local.Pull = 256 << 10
	return m
}

// oversubscribed is goldenModel on hosts of two cores.
func oversubscribed() Model {
	m := goldenModel
	m.Cores = 2
	m.Wake = 5e-6
	return m
}

// TestDescribe: what gorun --topo says of the machine, the hosts and their
// ranks and the constants, and no algorithm (prims.Report adds those; its
// golden files hold Describe's output too).
func TestDescribe(t *testing.T) {
	var b strings.Builder
	if err := Describe(&b, pulling(), FromHostIDs([]string{"a", "a", "b"})); err != nil {
		t.Fatal(err)
	}
	got := b.String()
	for _, want := range []string{
		"# 3 ranks on 2 hosts\n",
		"host 0  a  2 ranks:  0 1\n",
		"host 1  b  1 rank:   2\n",
		"# model\n",
		"alpha 10.00 us", "beta 0.4000 ns/B (2.50 GB/s), single copy from 256 KiB",
		"alpha 40.00 us", "beta 0.8333 ns/B (1.20 GB/s)",
		"gamma 0.2000 ns/B (5.00 GB/s)",
		"2 per host", "wake 5.00 us per rank beyond them",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("Describe does not say %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "# algorithm") || strings.Contains(got, "shared memory") {
		t.Errorf("Describe speaks of algorithms, or of shared memory on two hosts:\n%s", got)
	}
}
