package hosts

import (
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestHostfileManPage keeps gorun-hostfile(5) true: its example hostfile
// parses to the hosts the page describes, the error it quotes is the one
// the parser gives, and mandoc finds nothing to say.
func TestHostfileManPage(t *testing.T) {
	const page = "../../../man/gorun-hostfile.5"
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.NewReplacer(`\-`, "-", `\(dq`, `"`).Replace(string(b))
	_, rest, _ := strings.Cut(text, "\n.SH EXAMPLES\n")
	_, rest, _ = strings.Cut(rest, ".nf\n")
	example, _, _ := strings.Cut(rest, ".fi\n")
	hs, err := ParseHostfile("example", strings.NewReader(example))
	if err != nil {
		t.Fatalf("the example of %s does not parse: %v", page, err)
	}
	want := []Host{
		{Name: "node1", Slots: 4, MaxSlots: 8},
		{Name: "node2", User: "alice", Slots: 1},
		{Name: "node3", Slots: 2},
		{Name: "node4", Slots: 4},
		{Name: "node5", Slots: 8},
	}
	if len(hs) != len(want) {
		t.Fatalf("the example parsed to %d hosts, want %d: %+v", len(hs), len(want), hs)
	}
	for i, w := range want {
		h := hs[i]
		if h.Name != w.Name || h.User != w.User || h.Slots != w.Slots || h.MaxSlots != w.MaxSlots {
			t.Errorf("host %d is %+v, want %+v", i, h, w)
		}
	}

	// The quoted error, its two lines joined, is the parser's.
	_, rest, _ = strings.Cut(text, "says what was expected, for example:")
	_, rest, _ = strings.Cut(rest, ".nf\n")
	quoted, _, _ := strings.Cut(rest, ".fi\n")
	quoted = strings.Join(strings.Fields(quoted), " ")
	_, err = ParseHostfile("hosts.txt", strings.NewReader(strings.Repeat("\n", 6)+"node1 slots=abc\n"))
	var pe *ParseError
	if !errors.As(err, &pe) || strings.Join(strings.Fields(err.Error()), " ") != quoted {
		t.Errorf("the page quotes\n\t%s\nthe parser says\n\t%v", quoted, err)
	}

	if mandoc, err := exec.LookPath("mandoc"); err == nil {
		if out, err := exec.Command(mandoc, "-Tlint", "-W", "warning", page).CombinedOutput(); err != nil {
			t.Errorf("mandoc -Tlint %s: %v\n%s", page, err, out)
		}
	}
}
