package launch

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Modes of reaching a host's agent.
const (
	modeSSH  = "ssh"  // the system ssh client, or --launch-agent
	ModeSrun = "srun" // srun inside a Slurm allocation
)

// remote says how agents are started: the command prefix before the
// destination, and the gorun to run there. It travels to agents in setup so
// that they start their children the same way.
type remote struct {
	Mode  string   // modeSSH or ModeSrun
	Argv  []string // command before the destination: ssh -F cfg -o BatchMode=yes ...
	Gorun string   // gorun's path on the hosts (without --preload)
	own   int      // how many words of Argv the user wrote (ssh or --launch-agent, --ssh-args); 0: all
}

// agentFlag is the hidden flag that makes gorun an agent.
const agentFlag = "--agent"

// newRemote builds how agents are started: srun options inside Slurm, else
// ssh (or launchAgent, an rsh-like command) with sshArgs, split like a
// shell would, then batch mode and the connect timeout.
func newRemote(mode, sshArgs, launchAgent string, connectTimeout time.Duration, gorun string) (remote, error) {
	r := remote{Mode: mode, Gorun: gorun}
	if mode == ModeSrun {
		// One task on one node per agent, sharing the allocation's CPUs with
		// the ranks' steps, unbuffered so that frames pass at once.
		r.Argv = []string{"srun", "--nodes=1", "--ntasks=1", "--overlap", "--cpu-bind=none",
			"--unbuffered", "--kill-on-bad-exit=1", "--quiet", "--job-name=gorun-agent"}
		return r, nil
	}
	extra, err := splitShell(sshArgs)
	if err != nil {
		return r, fmt.Errorf("--ssh-args %q: %w", sshArgs, err)
	}
	agent := []string{"ssh"}
	if launchAgent != "" {
		if agent, err = splitShell(launchAgent); err != nil || len(agent) == 0 {
			return r, fmt.Errorf("--launch-agent %q: want a command such as \"ssh -p 2222\"", launchAgent)
		}
	}
	r.Argv = append(agent, extra...)
	r.own = len(r.Argv)
	if filepath.Base(agent[0]) == "ssh" {
		// The user's options come first: ssh keeps the first value it sees.
		r.Argv = append(r.Argv, "-o", "BatchMode=yes", "-x", "-T")
		if connectTimeout > 0 { // 0: no limit, for ssh as for gorun (connectWait)
			secs := int((connectTimeout + time.Second - 1) / time.Second)
			r.Argv = append(r.Argv, "-o", "ConnectTimeout="+strconv.Itoa(secs))
		}
		if !mentions(r.Argv[:r.own], "ServerAlive") {
			r.Argv = append(r.Argv, "-o", "ServerAliveInterval="+strconv.Itoa(sshAliveInterval),
				"-o", "ServerAliveCountMax="+strconv.Itoa(sshAliveCount))
		}
	}
	return r, nil
}

// sshAliveInterval and sshAliveCount are the keepalives of the agents'
// ssh unless the user's ssh words set them: a link that stops carrying
// anything (a host cut off, a switch down) ends ssh, with status 255, once
// sshAliveCount keepalives sshAliveInterval seconds apart go unanswered
// (30 s), and the host is lost. Without them, a dead link went unnoticed
// while the job ran, or for as long as TCP retries (15 minutes) once
// gorun had something to send. A frozen agent does not end ssh: its
// sshd answers the keepalives.
const (
	sshAliveInterval = 10
	sshAliveCount    = 3
)

// mentions reports whether any of words contains s, ignoring case (ssh
// reads option names so).
func mentions(words []string, s string) bool {
	s = strings.ToLower(s)
	for _, w := range words {
		if strings.Contains(strings.ToLower(w), s) {
			return true
		}
	}
	return false
}

// Command returns the argv that runs remote (a command and its arguments)
// on the host named name, reached at dest. ssh-like commands get one shell
// command line, quoted; srun gets argv as is.
func (r remote) Command(name, dest string, remote []string) []string {
	argv := append([]string(nil), r.Argv...)
	if r.Mode == ModeSrun {
		argv = append(argv, "--nodelist="+name)
		return append(argv, remote...)
	}
	return append(argv, dest, "exec "+shellJoin(remote))
}

// try is the command line a user can run to see whether t is reached as
// its agent would be: the launch agent (ssh or --launch-agent, with
// --ssh-args) and the host, running true.
func (r remote) try(t target) string {
	if r.Mode == ModeSrun {
		return shellJoin([]string{"srun", "--nodes=1", "--nodelist=" + t.Name, "true"})
	}
	argv := r.Argv
	if r.own > 0 {
		argv = argv[:r.own]
	}
	return shellJoin(append(append([]string(nil), argv...), t.Dest, "true"))
}

// shellJoin quotes args for a POSIX shell and joins them with spaces.
func shellJoin(args []string) string {
	q := make([]string, len(args))
	for i, a := range args {
		q[i] = shellQuote(a)
	}
	return strings.Join(q, " ")
}

// shellQuote quotes s for a POSIX shell, leaving plain words alone.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// splitShell splits s into words as a POSIX shell would: blanks separate
// words, single quotes keep everything, double quotes keep all but \" \\ \$
// and \`, a backslash outside quotes escapes the next character. There is no
// expansion of variables or globs.
func splitShell(s string) ([]string, error) {
	var words []string
	var w strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, w.String())
				w.Reset()
				inWord = false
			}
		case c == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("trailing backslash")
			}
			i++
			w.WriteByte(s[i])
			inWord = true
		case c == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("unterminated '")
			}
			w.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inWord = true
		case c == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\"\\$`", s[i+1]) >= 0 {
					i++
				}
				w.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("unterminated \"")
			}
			inWord = true
		default:
			w.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, w.String())
	}
	return words, nil
}
