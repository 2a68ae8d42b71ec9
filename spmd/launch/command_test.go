package launch

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestSplitShell(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"  -F cfg  -p 2222 ", []string{"-F", "cfg", "-p", "2222"}},
		{`-o "ProxyCommand ssh -W %h:%p gw" -i 'my key'`, []string{"-o", "ProxyCommand ssh -W %h:%p gw", "-i", "my key"}},
		{`a\ b "c\"d" 'e"f' g""h`, []string{"a b", `c"d`, `e"f`, "gh"}},
		{`""`, []string{""}},
		{`"a\nb"`, []string{`a\nb`}},
	} {
		got, err := splitShell(tc.in)
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("splitShell(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{`"open`, `'open`, `trailing\`} {
		if _, err := splitShell(bad); err == nil {
			t.Errorf("splitShell(%q): no error", bad)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for _, s := range []string{"plain", "/path/to/gorun", "with space", "it's", "", "$HOME", "a\"b", "--agent"} {
		words, err := splitShell(shellQuote(s))
		if err != nil || len(words) != 1 || words[0] != s {
			t.Errorf("splitShell(shellQuote(%q)) = %q, %v", s, words, err)
		}
	}
	if got := shellQuote("/usr/bin/gorun"); got != "/usr/bin/gorun" {
		t.Errorf("shellQuote left a plain path as %s", got)
	}
}

func TestRemoteCommand(t *testing.T) {
	agent := []string{"/opt/my gorun/gorun", agentFlag}
	for _, tc := range []struct {
		name                 string
		mode, args, launcher string
		timeout              time.Duration
		want                 string
		try                  string // remote.try, the hint for a host that does not answer
	}{
		{"ssh", modeSSH, "", "", 10 * time.Second,
			`ssh -o BatchMode=yes -x -T -o ConnectTimeout=10 -o ServerAliveInterval=10 -o ServerAliveCountMax=3 alice@n1 exec '/opt/my gorun/gorun' --agent`, "ssh alice@n1 true"},
		{"ssh args first", modeSSH, `-F "/tmp/a b/cfg" -p 2222`, "", 1500 * time.Millisecond,
			`ssh -F /tmp/a b/cfg -p 2222 -o BatchMode=yes -x -T -o ConnectTimeout=2 -o ServerAliveInterval=10 -o ServerAliveCountMax=3 alice@n1 exec '/opt/my gorun/gorun' --agent`,
			`ssh -F '/tmp/a b/cfg' -p 2222 alice@n1 true`},
		{"user's keepalives", modeSSH, "-o serveraliveinterval=60", "", 0,
			`ssh -o serveraliveinterval=60 -o BatchMode=yes -x -T alice@n1 exec '/opt/my gorun/gorun' --agent`,
			`ssh -o serveraliveinterval=60 alice@n1 true`},
		{"launch agent ssh", modeSSH, "", "/usr/bin/ssh -q", 0,
			`/usr/bin/ssh -q -o BatchMode=yes -x -T -o ServerAliveInterval=10 -o ServerAliveCountMax=3 alice@n1 exec '/opt/my gorun/gorun' --agent`, "/usr/bin/ssh -q alice@n1 true"},
		{"launch agent's keepalives", modeSSH, "", "ssh -o ServerAliveCountMax=1", 0,
			`ssh -o ServerAliveCountMax=1 -o BatchMode=yes -x -T alice@n1 exec '/opt/my gorun/gorun' --agent`,
			`ssh -o ServerAliveCountMax=1 alice@n1 true`},
		{"launch agent rsh", modeSSH, "-l bob", "rsh", 5 * time.Second,
			`rsh -l bob alice@n1 exec '/opt/my gorun/gorun' --agent`, "rsh -l bob alice@n1 true"},
		{"srun", ModeSrun, "-F ignored", "", 5 * time.Second,
			`srun --nodes=1 --ntasks=1 --overlap --cpu-bind=none --unbuffered --kill-on-bad-exit=1 --quiet --job-name=gorun-agent --nodelist=n1 /opt/my gorun/gorun --agent`,
			"srun --nodes=1 --nodelist=n1 true"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := newRemote(tc.mode, tc.args, tc.launcher, tc.timeout, agent[0])
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(r.Command("n1", "alice@n1", agent), " ")
			if got != tc.want {
				t.Errorf("command\n got %s\nwant %s", got, tc.want)
			}
			if got := r.try(target{Name: "n1", Dest: "alice@n1"}); got != tc.try {
				t.Errorf("try\n got %s\nwant %s", got, tc.try)
			}
		})
	}
	if _, err := newRemote(modeSSH, `-o "open`, "", 0, "gorun"); err == nil {
		t.Error("unbalanced quote in --ssh-args: no error")
	}
	if _, err := newRemote(modeSSH, "", "  ", 0, "gorun"); err == nil {
		t.Error("blank --launch-agent: no error")
	}
}

// TestConnectWait: gorun waits --connect-timeout per level of the spawn
// tree and connectMargin, where it added 5 s; 0 is no limit, as for ssh
// (it was 10 s to gorun and none to ssh).
func TestConnectWait(t *testing.T) {
	for _, tc := range []struct {
		name     string
		per      time.Duration
		radix, n int
		want     time.Duration
	}{
		{"one level", 2 * time.Second, 32, 4, 2*time.Second + connectMargin},
		{"two levels", 2 * time.Second, 2, 5, 4*time.Second + connectMargin},
		{"no limit", 0, 32, 4, 0},
	} {
		cfg := DefaultConfig()
		cfg.ConnectTimeout = Duration(tc.per)
		if got := connectWait(&cfg, tc.radix, tc.n, false); got != tc.want {
			t.Errorf("%s: connectWait = %v, want %v", tc.name, got, tc.want)
		}
	}
}
