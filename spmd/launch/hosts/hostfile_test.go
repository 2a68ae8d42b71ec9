package hosts

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

func TestParseHostfile(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Host
	}{
		{"empty", "", nil},
		{"comments and blanks", "# cluster\n\n   \n\t# more\n", nil},
		{"openmpi slots", "node1 slots=4 max_slots=8\n", []Host{{Name: "node1", Slots: 4, MaxSlots: 8, Line: 1}}},
		{"openmpi user", "user@node2\n", []Host{{Name: "node2", User: "user", Slots: 1, Line: 1}}},
		{"openmpi comment after", "node3 slots=2 # rack 1\n", []Host{{Name: "node3", Slots: 2, Line: 1}}},
		{"count synonym", "node1 count=3\n", []Host{{Name: "node1", Slots: 3, Line: 1}}},
		{"cpu synonym", "node1 cpu=2\n", []Host{{Name: "node1", Slots: 2, Line: 1}}},
		{"max-slots spelling", "node1 slots=2 max-slots=4\n", []Host{{Name: "node1", Slots: 2, MaxSlots: 4, Line: 1}}},
		{"keys any case", "node1 SLOTS=2\n", []Host{{Name: "node1", Slots: 2, Line: 1}}},
		{"spaces around equals", "node1 slots = 4\nnode2 slots= 2\nnode3 slots =1\n", []Host{
			{Name: "node1", Slots: 4, Line: 1}, {Name: "node2", Slots: 2, Line: 2}, {Name: "node3", Slots: 1, Line: 3}}},
		{"username key", "node1 slots=2 username=bob\n", []Host{{Name: "node1", User: "bob", Slots: 2, Line: 1}}},
		{"mpich", "node1:4\nnode2\n", []Host{{Name: "node1", Slots: 4, Line: 1}, {Name: "node2", Slots: 1, Line: 2}}},
		{"mpich with user", "alice@node1:4\n", []Host{{Name: "node1", User: "alice", Slots: 4, Line: 1}}},
		{"deepspeed", "worker-1 slots=4\nworker-2 slots=4\n", []Host{{Name: "worker-1", Slots: 4, Line: 1}, {Name: "worker-2", Slots: 4, Line: 2}}},
		{"mixed formats", "a slots=2\nb:3\nc\n", []Host{{Name: "a", Slots: 2, Line: 1}, {Name: "b", Slots: 3, Line: 2}, {Name: "c", Slots: 1, Line: 3}}},
		{"crlf and tabs", "node1\tslots=2\r\nnode2:3\r\n", []Host{{Name: "node1", Slots: 2, Line: 1}, {Name: "node2", Slots: 3, Line: 2}}},
		{"ipv4", "10.0.0.1 slots=2\n", []Host{{Name: "10.0.0.1", Slots: 2, Line: 1}}},
		{"ipv6 bare", "fe80::1 slots=2\n", []Host{{Name: "fe80::1", Slots: 2, Line: 1}}},
		{"ipv6 bracketed count", "[fe80::1]:3\n", []Host{{Name: "fe80::1", Slots: 3, Line: 1}}},
		{"ipv6 zone", "fe80::1%eth0\n", []Host{{Name: "fe80::1%eth0", Slots: 1, Line: 1}}},
		{"repeated host merges", "node1 slots=2\nnode2\nnode1 slots=3\n", []Host{{Name: "node1", Slots: 5, Line: 1}, {Name: "node2", Slots: 1, Line: 2}}},
		{"repeated max slots add", "node1 slots=2 max_slots=3\nnode1 slots=1 max_slots=2\n", []Host{{Name: "node1", Slots: 3, MaxSlots: 5, Line: 1}}},
		{"repeated without max is unlimited", "node1 slots=2 max_slots=3\nnode1\n", []Host{{Name: "node1", Slots: 3, Line: 1}}},
		{"repeated user kept", "node1\nalice@node1\n", []Host{{Name: "node1", User: "alice", Slots: 2, Line: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseHostfile("hostfile.txt", strings.NewReader(tt.in))
			if err != nil {
				t.Fatalf("ParseHostfile(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseHostfile(%q)\n got %+v\nwant %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseHostfileErrors(t *testing.T) {
	tests := []struct {
		name string
		in   string
		line int
		want string // substring of the message
		err  error
	}{
		{"slots not a number", "node0\n\n# c\n\n\n\nnode1 slots=abc\n", 7,
			`hostfile.txt:7: "node1 slots=abc": slots must be a positive whole number (e.g. node1 slots=4)`, ErrSyntax},
		{"slots zero", "node1 slots=0", 1, "slots must be a positive whole number", ErrSyntax},
		{"slots negative", "node1 slots=-2", 1, "slots must be a positive whole number", ErrSyntax},
		{"slots huge", "node1 slots=99999999999999999999", 1, "slots 99999999999999999999 is more than 1048576, the most slots one host may have", ErrSyntax},
		{"slots empty", "node1 slots=", 1, "slots must be a positive whole number", ErrSyntax},
		{"max below slots", "node1 slots=4 max_slots=2", 1, "max_slots=2 is less than slots=4", ErrSyntax},
		{"max not a number", "node1 max_slots=x", 1, "max_slots must be a positive whole number", ErrSyntax},
		{"unknown key", "node1 sloths=4", 1, `unknown key "sloths"`, ErrSyntax},
		{"bare word option", "node1 fast", 1, "expected key=value", ErrSyntax},
		{"slots twice", "node1 slots=2 count=3", 1, "slot count is given twice", ErrSyntax},
		{"colon and slots", "node1:2 slots=3", 1, "given twice, as host:N", ErrSyntax},
		{"mpich bad count", "node1:x", 1, "the count after : must be a positive whole number (e.g. node1:4)", ErrSyntax},
		{"mpich empty count", "node1:", 1, "the count after :", ErrSyntax},
		{"leading dash", "-oProxyCommand=x slots=1", 1, "host name", ErrSyntax},
		{"empty user", "@node1", 1, "user before @", ErrSyntax},
		{"empty host", "alice@ slots=2", 1, "host name", ErrSyntax},
		{"bad char", "no/de slots=2", 1, "host name", ErrSyntax},
		{"mpich interface suffix", "node1:4:ib0", 1, "expected host:count", ErrSyntax},
		{"percent in name", "node%1 slots=2", 1, "host name", ErrSyntax},
		{"bracketed non-ipv6", "[node1]:2", 1, "must be an IPv6 address", ErrSyntax},
		{"ipv6 unclosed", "[fe80::1 slots=2", 1, "missing ]", ErrSyntax},
		{"conflicting users", "alice@node1\nbob@node1", 2, `listed with user "alice" on line 1`, ErrSyntax},
		{"merged slots too many", "node1 slots=1048576\nnode1", 2, "more than", ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseHostfile("hostfile.txt", strings.NewReader(tt.in))
			if err == nil {
				t.Fatalf("ParseHostfile(%q): no error", tt.in)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			if pe.File != "hostfile.txt" || pe.Line != tt.line {
				t.Errorf("error at %s:%d, want hostfile.txt:%d", pe.File, pe.Line, tt.line)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("error %v does not match %v", err, tt.err)
			}
		})
	}
}

func TestParseHostfileLongLine(t *testing.T) {
	in := "node1\n" + strings.Repeat("x", maxLine+1) + "\n"
	_, err := ParseHostfile("big", strings.NewReader(in))
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("got %v, want ErrTooLarge", err)
	}
}

func TestParseHostList(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []Host
	}{
		{"counts", "node1:2,node2:2,node3", []Host{{Name: "node1", Slots: 2}, {Name: "node2", Slots: 2}, {Name: "node3", Slots: 1}}},
		{"single", "localhost", []Host{{Name: "localhost", Slots: 1}}},
		{"spaces", " node1:2 , node2 ", []Host{{Name: "node1", Slots: 2}, {Name: "node2", Slots: 1}}},
		{"user", "alice@node1:3", []Host{{Name: "node1", User: "alice", Slots: 3}}},
		{"repeat merges", "node1,node2,node1", []Host{{Name: "node1", Slots: 2}, {Name: "node2", Slots: 1}}},
		{"ipv6", "[::1]:2,fe80::2", []Host{{Name: "::1", Slots: 2}, {Name: "fe80::2", Slots: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseHostList(tt.in)
			if err != nil {
				t.Fatalf("ParseHostList(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseHostList(%q)\n got %+v\nwant %+v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseHostListErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"empty", "", "empty entry"},
		{"trailing comma", "node1,", "empty entry"},
		{"double comma", "node1,,node2", "empty entry"},
		{"bad count", "node1:x", `host list: "node1:x": the count after : must be a positive whole number`},
		{"zero count", "node1:0", "positive whole number"},
		{"option injection", "-oProxyCommand=sh", "host name"},
		{"user conflict", "a@n,b@n", "use one user per host"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseHostList(tt.in)
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrSyntax) {
				t.Fatalf("ParseHostList(%q) = %v, want a *ParseError matching ErrSyntax", tt.in, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestHostDestinationAndString(t *testing.T) {
	tests := []struct {
		h          Host
		dest, line string
	}{
		{Host{Name: "n1", Slots: 2}, "n1", "n1 slots=2"},
		{Host{Name: "n1", User: "al", Addr: "10.0.0.1", Slots: 1, MaxSlots: 4}, "al@10.0.0.1", "al@n1 slots=1 max_slots=4"},
	}
	for _, tt := range tests {
		if got := tt.h.Destination(); got != tt.dest {
			t.Errorf("%+v.Destination() = %q, want %q", tt.h, got, tt.dest)
		}
		if got := tt.h.String(); got != tt.line {
			t.Errorf("%+v.String() = %q, want %q", tt.h, got, tt.line)
		}
		back, err := ParseHostfile("s", strings.NewReader(tt.h.String()))
		if err != nil || len(back) != 1 || back[0].Slots != tt.h.Slots || back[0].MaxSlots != tt.h.MaxSlots {
			t.Errorf("String() does not round-trip: %v %+v", err, back)
		}
	}
}
