package launch

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// testCluster is a cluster of n hosts h1..hn in a spawn tree of radix,
// with no agents started, and one rank on each host.
func testCluster(t *testing.T, n, radix int) (*cluster, []proc) {
	t.Helper()
	var log bytes.Buffer
	out := newOutput(&log, &log)
	c := newCluster(targetsN(n), remote{}, radix, func(target) setupMsg { return setupMsg{} }, out, func(string, ...any) {})
	var procs []proc
	for r := range n {
		p, err := c.Start(&spec{Rank: rankPlan{Rank: r, Host: targetsN(n)[r].Name}, Stdout: nopCloser{&bytes.Buffer{}}, Stderr: nopCloser{&bytes.Buffer{}}})
		if err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	return c, procs
}

// TestClusterLoseNamesDroppedHost: the ranks of a host whose agent's
// connection dropped and of the hosts reached through it end with one
// status, naming that host and those lost with it. The hosts below it
// said "connection to its agent lost (its agent was to be started by the
// agent on h1 ...)", and whichever rank the supervisor heard of first
// named its own host.
func TestClusterLoseNamesDroppedHost(t *testing.T) {
	c, procs := testCluster(t, 3, 1) // h1 starts h2, which starts h3
	c.lose(1, "ssh exited 255")
	want := status{Lost: "connection to its agent lost (ssh exited 255); hosts h2, h3, reached through its agent, are lost with it", LostHost: "h1"}
	for r, p := range procs {
		if st := p.Wait(); !equalStatus(st, want) {
			t.Errorf("rank %d on h%d: %+v, want %+v", r, r+1, st, want)
		}
	}
	if why := c.hosts[1].lost; why != "ssh exited 255" {
		t.Errorf("h1 lost %q, want the reason alone, which connect says after \"cannot start its agent: \"", why)
	}
	c.lose(2, "a later word") // h2 is lost already
	if _, err := c.Start(&spec{Rank: rankPlan{Rank: 3, Host: "h3"}}); err == nil || !strings.Contains(err.Error(), "the agent on h1, which was lost") {
		t.Errorf("start on h3 after h1 was lost: %v", err)
	}
}

func equalStatus(a, b status) bool {
	return a.Code == b.Code && a.Signal == b.Signal && a.Lost == b.Lost && a.LostHost == b.LostHost && slices.Equal(a.LostPeers, b.LostPeers)
}
