package hosts

import (
	"errors"
	"strings"
	"testing"
)

func FuzzParseHostfile(f *testing.F) {
	for _, s := range []string{
		"node1 slots=4 max_slots=8\nuser@node2\nnode3 slots=2 # c\n",
		"node1:4\nnode2\n", "worker-1 slots=4\n", "node1 count=2\n\n#x\n",
		"[fe80::1]:2\nfe80::2 slots=1\n", "node1 slots = 3\n", "a@b:1 user=a\n",
		"node1 slots=abc\n", "n\nn\nn max_slots=1\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		hosts, err := ParseHostfile("fuzz", strings.NewReader(in))
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || !(errors.Is(err, ErrSyntax) || errors.Is(err, ErrTooLarge)) {
				t.Fatalf("error %v is not a *ParseError with a sentinel", err)
			}
			return
		}
		names := map[string]bool{}
		for _, h := range hosts {
			if !validName(h.Name) || names[h.Name] || h.Slots < 1 || h.Slots > MaxSlots ||
				(h.MaxSlots != 0 && h.MaxSlots < h.Slots) || h.Line < 1 {
				t.Fatalf("bad host %+v from %q", h, in)
			}
			names[h.Name] = true
		}
		if len(hosts) > 0 {
			// Map must also cope with whatever the parser accepts.
			_, _ = Map(hosts, 0, MapOptions{})
			_, _ = Map(hosts, 7, MapOptions{Policy: ByNode, Oversubscribe: true})
		}
	})
}

func FuzzParseNodeList(f *testing.F) {
	for _, s := range []string{
		"n[01-04,07],gpu[1-2]", "node1,node2", "rack[1-2]-n[1-3]", "n[098-101]",
		"[1-3]", "n[1-", "n[]", "a[1-1000]b[1-1000]", "n[0-999999999]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		names, err := ParseNodeList(in)
		if err != nil {
			var ee *EnvError
			if !errors.As(err, &ee) || !(errors.Is(err, ErrSyntax) || errors.Is(err, ErrTooLarge)) {
				t.Fatalf("error %v is not an *EnvError with a sentinel", err)
			}
			return
		}
		if len(names) == 0 || len(names) > MaxHosts {
			t.Fatalf("%d names from %q", len(names), in)
		}
		for _, n := range names {
			if !validName(n) {
				t.Fatalf("invalid name %q from %q", n, in)
			}
		}
	})
}

func FuzzParseTasksPerNode(f *testing.F) {
	for _, s := range []string{"2(x3),1", "4", "1,2,3", "2(x", "1(x999999999)", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		counts, err := ParseTasksPerNode(in)
		if err != nil {
			var ee *EnvError
			if !errors.As(err, &ee) || !(errors.Is(err, ErrSyntax) || errors.Is(err, ErrTooLarge)) {
				t.Fatalf("error %v is not an *EnvError with a sentinel", err)
			}
			return
		}
		if len(counts) == 0 || len(counts) > MaxHosts {
			t.Fatalf("%d counts from %q", len(counts), in)
		}
		for _, c := range counts {
			if c < 1 || c > MaxSlots {
				t.Fatalf("count %d from %q", c, in)
			}
		}
	})
}
