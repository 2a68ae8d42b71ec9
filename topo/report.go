package topo

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/gorun-hpc/gorun/spmd/contract"
)

// Describe writes what gorun --topo says of the machine: the hosts of lay
// and their ranks, whether the ranks of one host share memory, and the
// constants of m. prims.Report follows it with the algorithm it chooses
// per collective and size.
func Describe(w io.Writer, m Model, lay Layout) error {
	var b strings.Builder
	p := lay.Size()
	fmt.Fprintf(&b, "# %d %s on %d %s\n", p, plural(p, "rank"), len(lay.Hosts), plural(len(lay.Hosts), "host"))
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	for h, ranks := range lay.Hosts {
		name := lay.Names[h]
		if lay.HostIDs[h] != name {
			name += " (" + lay.HostIDs[h] + ")"
		}
		fmt.Fprintf(tw, "host %d\t%s\t%d %s:\t%s\n", h, name, len(ranks), plural(len(ranks), "rank"), rankList(ranks))
	}
	tw.Flush()
	if line := sharing(lay); line != "" {
		fmt.Fprintln(&b, line)
	}
	fmt.Fprintf(&b, "\n# model\n")
	tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "same host\talpha %s\tbeta %s%s%s\n", micros(m.Local.Alpha), perByte(m.Local.Beta), pulls(m.Local.Pull), assumed(m.LocalProbed))
	fmt.Fprintf(tw, "other host\talpha %s\tbeta %s%s%s\n", micros(m.Remote.Alpha), perByte(m.Remote.Beta), pulls(m.Remote.Pull), assumed(m.RemoteProbed))
	fmt.Fprintf(tw, "reduction\tgamma %s\t\n", perByte(m.Gamma))
	fmt.Fprintf(tw, "cores\t%d per host\twake %s per rank beyond them\n", m.Cores, micros(m.Wake))
	if m.Round > 0 {
		fmt.Fprintf(tw, "round\t%s\ta collective's message round, every rank busy\n", micros(m.Round))
	}
	tw.Flush()
	_, err := io.WriteString(w, b.String())
	return err
}

// sharing says whether the ranks of lay, when they are on one host, share
// memory (Layout.Shared), as the Shared algorithms need: without it they
// are no candidates, and collectives cost several times what they would.
// It is "" for several hosts or one rank.
func sharing(lay Layout) string {
	switch {
	case len(lay.Hosts) != 1 || lay.Size() < 2:
		return ""
	case lay.Shared:
		return "shared memory: yes, the Shared algorithms apply"
	}
	return "shared memory: no, the ranks' transport maps none (" + contract.EnvTransport + "=tcp?): the Shared algorithms do not apply"
}

func rankList(ranks []int) string {
	s := make([]string, len(ranks))
	for i, r := range ranks {
		s[i] = fmt.Sprint(r)
	}
	return strings.Join(s, " ")
}

func micros(s float64) string { return fmt.Sprintf("%.2f us", s*1e6) }

func perByte(s float64) string {
	if s == 0 {
		return "0 ns/B"
	}
	return fmt.Sprintf("%.4f ns/B (%.2f GB/s)", s*1e9, 1/s/1e9)
}

// Size formats a byte count with a binary unit: 8 B, 4 KiB, 64 MiB.
func Size(n int) string {
	units := []string{"B", "KiB", "MiB", "GiB"}
	u := 0
	for u < len(units)-1 && n >= 1024 && n%1024 == 0 {
		n /= 1024
		u++
	}
	return fmt.Sprintf("%d %s", n, units[u])
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// pulls says from what size a link's receivers copy out of the sender's
// memory, if they do.
func pulls(n float64) string {
	if n <= 0 {
		return ""
	}
	return ", single copy from " + Size(int(n))
}

func assumed(probed bool) string {
	if probed {
		return "\tmeasured"
	}
	return "\tassumed"
}
