package hosts

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestParseNodeList(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []string
	}{
		{"single", "node1", []string{"node1"}},
		{"plain list", "node1,node2", []string{"node1", "node2"}},
		{"range and single", "n[01-04,07]", []string{"n01", "n02", "n03", "n04", "n07"}},
		{"two items", "n[01-04,07],gpu[1-2]", []string{"n01", "n02", "n03", "n04", "n07", "gpu1", "gpu2"}},
		{"unpadded crossing width", "n[9-11]", []string{"n9", "n10", "n11"}},
		{"padded crossing width", "n[098-101]", []string{"n098", "n099", "n100", "n101"}},
		{"single in brackets", "n[5]", []string{"n5"}},
		{"suffix", "n[1-2]-ib", []string{"n1-ib", "n2-ib"}},
		{"cartesian", "rack[1-2]-n[1-3]", []string{"rack1-n1", "rack1-n2", "rack1-n3", "rack2-n1", "rack2-n2", "rack2-n3"}},
		{"cartesian lists", "r[1,3]n[01-02]", []string{"r1n01", "r1n02", "r3n01", "r3n02"}},
		{"only brackets", "[1-3]", []string{"1", "2", "3"}},
		{"dotted", "node1.cluster,n[1-2].cluster", []string{"node1.cluster", "n1.cluster", "n2.cluster"}},
		{"mixed", "a,b[1-2],c", []string{"a", "b1", "b2", "c"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseNodeList(tt.in)
			if err != nil {
				t.Fatalf("ParseNodeList(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseNodeList(%q) = %q, want %q", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseNodeListErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
		err            error
	}{
		{"empty", "", "empty node list", ErrSyntax},
		{"unclosed", "n[1-4", "missing ]", ErrSyntax},
		{"unopened", "n1-4]", "without a matching [", ErrSyntax},
		{"nested", "n[1-[2]]", "nested [", ErrSyntax},
		{"empty brackets", "n[]", "empty brackets", ErrSyntax},
		{"backwards", "n[4-1]", "runs backwards", ErrSyntax},
		{"letters", "n[a-c]", `bad range "a-c"`, ErrSyntax},
		{"open range", "n[1-]", `bad range "1-"`, ErrSyntax},
		{"empty item", "n1,,n2", "empty name between commas", ErrSyntax},
		{"trailing comma", "n1,", "empty name between commas", ErrSyntax},
		{"dash name", "-n[1-2]", "not starting with '-'", ErrSyntax},
		{"huge range", "n[0-999999999]", "more than 100000 entries", ErrSyntax},
		{"huge product", "a[1-1000]b[1-1000]", "more than 100000 nodes", ErrTooLarge},
		{"huge sum", strings.Repeat("n[1-60000],", 2) + "x", "more than 100000 nodes", ErrTooLarge},
		{"long name", strings.Repeat("a", 300) + "[1-2]", "longer than 255", ErrSyntax},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseNodeList(tt.in)
			var ee *EnvError
			if !errors.As(err, &ee) || ee.Var != "SLURM_JOB_NODELIST" {
				t.Fatalf("ParseNodeList(%q) = %v, want an *EnvError naming SLURM_JOB_NODELIST", tt.in, err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.HasPrefix(err.Error(), "SLURM_JOB_NODELIST=") {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
			if !errors.Is(err, tt.err) {
				t.Errorf("error %v does not match %v", err, tt.err)
			}
		})
	}
}

func TestParseTasksPerNode(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want []int
	}{
		{"single", "4", []int{4}},
		{"repeat and single", "2(x3),1", []int{2, 2, 2, 1}},
		{"list", "1,2,3", []int{1, 2, 3}},
		{"repeat once", "8(x1)", []int{8}},
		{"two repeats", "2(x2),1(x2)", []int{2, 2, 1, 1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseTasksPerNode(tt.in)
			if err != nil {
				t.Fatalf("ParseTasksPerNode(%q): %v", tt.in, err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("ParseTasksPerNode(%q) = %v, want %v", tt.in, got, tt.want)
			}
		})
	}
}

func TestParseTasksPerNodeErrors(t *testing.T) {
	tests := []struct {
		name, in, want string
		err            error
	}{
		{"empty", "", "empty", ErrSyntax},
		{"letters", "two", `bad count "two"`, ErrSyntax},
		{"zero", "0", "bad count", ErrSyntax},
		{"unclosed", "2(x3", `bad repeat "2(x3"`, ErrSyntax},
		{"no x", "2(3)", "bad repeat", ErrSyntax},
		{"zero repeat", "2(x0)", "bad repeat", ErrSyntax},
		{"junk after", "2(x3)y", "bad repeat", ErrSyntax},
		{"empty item", "2,,1", "bad count", ErrSyntax},
		{"huge repeat", "1(x999999999)", "more than 100000 nodes", ErrTooLarge},
		{"huge sum", "1(x60000),1(x60000)", "more than 100000 nodes", ErrTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseTasksPerNode(tt.in)
			var ee *EnvError
			if !errors.As(err, &ee) || ee.Var != "SLURM_TASKS_PER_NODE" {
				t.Fatalf("ParseTasksPerNode(%q) = %v, want an *EnvError naming SLURM_TASKS_PER_NODE", tt.in, err)
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

func env(kv ...string) func(string) string {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return func(k string) string { return m[k] }
}

func TestFromSlurm(t *testing.T) {
	tests := []struct {
		name   string
		getenv func(string) string
		want   []Host
		ok     bool
	}{
		{"outside slurm", env(), nil, false},
		{"tasks", env("SLURM_JOB_NODELIST", "n[1-3],gpu1", "SLURM_TASKS_PER_NODE", "2(x3),1"),
			[]Host{{Name: "n1", Slots: 2}, {Name: "n2", Slots: 2}, {Name: "n3", Slots: 2}, {Name: "gpu1", Slots: 1}}, true},
		{"old variable", env("SLURM_NODELIST", "a,b", "SLURM_TASKS_PER_NODE", "3(x2)"),
			[]Host{{Name: "a", Slots: 3}, {Name: "b", Slots: 3}}, true},
		{"cpus fallback", env("SLURM_JOB_NODELIST", "a,b", "SLURM_JOB_CPUS_PER_NODE", "8,4"),
			[]Host{{Name: "a", Slots: 8}, {Name: "b", Slots: 4}}, true},
		{"tasks win over cpus", env("SLURM_JOB_NODELIST", "a", "SLURM_TASKS_PER_NODE", "2", "SLURM_JOB_CPUS_PER_NODE", "8"),
			[]Host{{Name: "a", Slots: 2}}, true},
		{"no counts", env("SLURM_JOB_NODELIST", "a,b"), []Host{{Name: "a", Slots: 1}, {Name: "b", Slots: 1}}, true},
		{"cpus per task", env("SLURM_JOB_NODELIST", "a,b", "SLURM_JOB_CPUS_PER_NODE", "8,3", "SLURM_CPUS_PER_TASK", "2"),
			[]Host{{Name: "a", Slots: 4}, {Name: "b", Slots: 1}}, true},
		{"cpus per task, fewer cpus", env("SLURM_JOB_NODELIST", "a", "SLURM_JOB_CPUS_PER_NODE", "1", "SLURM_CPUS_PER_TASK", "2"),
			[]Host{{Name: "a", Slots: 1}}, true},
		// srun -n1 inside salloc -N2 -n8: the step's one task in
		// SLURM_TASKS_PER_NODE, the job's CPUs in SLURM_JOB_CPUS_PER_NODE.
		{"step of one", env("SLURM_JOB_NODELIST", "n[1-2]", "SLURM_TASKS_PER_NODE", "1", "SLURM_JOB_CPUS_PER_NODE", "4(x2)",
			"SLURM_STEP_ID", "0", "SLURM_STEP_NUM_TASKS", "1", "SLURM_STEP_TASKS_PER_NODE", "1"),
			[]Host{{Name: "n1", Slots: 4}, {Name: "n2", Slots: 4}}, true},
		{"step of one, one node", env("SLURM_JOB_NODELIST", "n1", "SLURM_TASKS_PER_NODE", "1", "SLURM_JOB_CPUS_PER_NODE", "4",
			"SLURM_STEP_ID", "3", "SLURM_STEP_NUM_TASKS", "1", "SLURM_STEP_TASKS_PER_NODE", "1"),
			[]Host{{Name: "n1", Slots: 4}}, true},
		{"step of one, cpus per task", env("SLURM_JOB_NODELIST", "n[1-2]", "SLURM_TASKS_PER_NODE", "1", "SLURM_JOB_CPUS_PER_NODE", "4(x2)",
			"SLURM_CPUS_PER_TASK", "2", "SLURM_STEP_ID", "0", "SLURM_STEP_NUM_TASKS", "1", "SLURM_STEP_TASKS_PER_NODE", "1"),
			[]Host{{Name: "n1", Slots: 2}, {Name: "n2", Slots: 2}}, true},
		{"step of one, no cpus", env("SLURM_JOB_NODELIST", "n[1-2]", "SLURM_TASKS_PER_NODE", "1",
			"SLURM_STEP_ID", "0", "SLURM_STEP_NUM_TASKS", "1", "SLURM_STEP_TASKS_PER_NODE", "1"),
			[]Host{{Name: "n1", Slots: 1}, {Name: "n2", Slots: 1}}, true},
		// srun -n1 --preserve-env leaves the job's SLURM_TASKS_PER_NODE.
		{"step of one, job's tasks kept", env("SLURM_JOB_NODELIST", "n[1-2]", "SLURM_TASKS_PER_NODE", "3,1", "SLURM_JOB_CPUS_PER_NODE", "4(x2)",
			"SLURM_STEP_ID", "0", "SLURM_STEP_NUM_TASKS", "1", "SLURM_STEP_TASKS_PER_NODE", "1"),
			[]Host{{Name: "n1", Slots: 3}, {Name: "n2", Slots: 1}}, true},
		{"step of two: its tasks", env("SLURM_JOB_NODELIST", "n[1-2]", "SLURM_TASKS_PER_NODE", "1(x2)", "SLURM_JOB_CPUS_PER_NODE", "4(x2)",
			"SLURM_STEP_ID", "0", "SLURM_STEP_NUM_TASKS", "2", "SLURM_STEP_TASKS_PER_NODE", "1(x2)"),
			[]Host{{Name: "n1", Slots: 1}, {Name: "n2", Slots: 1}}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok, err := FromSlurm(tt.getenv)
			if err != nil || ok != tt.ok {
				t.Fatalf("FromSlurm = %v, %v, %v; want ok %v", got, ok, err, tt.ok)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("FromSlurm\n got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestFromSlurmErrors(t *testing.T) {
	tests := []struct {
		name   string
		getenv func(string) string
		want   string
	}{
		{"bad nodelist", env("SLURM_JOB_NODELIST", "n[1-"), `SLURM_JOB_NODELIST="n[1-": missing ]`},
		{"bad old nodelist", env("SLURM_NODELIST", "n[]"), `SLURM_NODELIST="n[]": empty brackets`},
		{"bad tasks", env("SLURM_JOB_NODELIST", "a", "SLURM_TASKS_PER_NODE", "x"), `SLURM_TASKS_PER_NODE="x": bad count`},
		{"bad cpus", env("SLURM_JOB_NODELIST", "a", "SLURM_JOB_CPUS_PER_NODE", "1(x"), `SLURM_JOB_CPUS_PER_NODE="1(x": bad repeat`},
		{"count mismatch", env("SLURM_JOB_NODELIST", "n[1-3]", "SLURM_TASKS_PER_NODE", "2(x2)"),
			"gives counts for 2 nodes but SLURM_JOB_NODELIST lists 3 nodes"},
		{"bad cpus per task", env("SLURM_JOB_NODELIST", "a", "SLURM_JOB_CPUS_PER_NODE", "4", "SLURM_CPUS_PER_TASK", "0"),
			`SLURM_CPUS_PER_TASK="0": want a positive number of CPUs`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, ok, err := FromSlurm(tt.getenv)
			if !ok || !errors.Is(err, ErrSyntax) {
				t.Fatalf("FromSlurm = ok %v, %v; want ok and ErrSyntax", ok, err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func ExampleParseNodeList() {
	names, err := ParseNodeList("n[01-03,07],gpu[1-2]")
	if err != nil {
		panic(err)
	}
	fmt.Println(names)
	// Output: [n01 n02 n03 n07 gpu1 gpu2]
}
