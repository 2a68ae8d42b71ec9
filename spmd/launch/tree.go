package launch

import (
	"fmt"
	"sync"
	"time"
)

// splitTree divides the hosts below one node of the spawn tree among at
// most radix children: contiguous groups of nearly equal size, each
// group's first host being the child and the rest its own subtree. Depth
// grows as log_radix of the host count.
func splitTree(hosts []target, radix int) [][]target {
	if radix < 1 {
		radix = 1
	}
	n := len(hosts)
	k := min(radix, n)
	groups := make([][]target, 0, k)
	for i := range k {
		lo, hi := i*n/k, (i+1)*n/k
		groups = append(groups, hosts[lo:hi])
	}
	return groups
}

// spawner starts agents on a subtree of hosts, radix at a time, and routes
// frames down to them; with alive set, it sends them keepalives and gives
// up one that falls silent (watchdog.go). The launcher has one for all remote hosts, each
// agent one for its subtree. Frames coming up go to up unchanged, except a
// direct child's hello, which gets its host index and via stamped; a child
// whose connection ends is reported through lost.
type spawner struct {
	remote  remote
	radix   int
	via     string        // this node's name, stamped on its children's hellos
	preload []preloadFile // files to copy to each child first; nil: no preload
	logf    func(format string, args ...any)
	up      func(f frame)
	lost    func(host int, reason string)
	// agentTimeout is setupMsg.AgentTimeout: keepalives go to each
	// child every agentTimeout/aliveBeats, and a child silent for
	// agentTimeout is given up (watchdog.go); 0: neither.
	agentTimeout time.Duration

	mu        sync.Mutex    // protects following
	stopAlive chan struct{} // closed by close to end keepalive; nil before start
	links     []*link
	route     map[int]*link  // host index -> the child link whose subtree holds it
	dirs      map[int]string // host index of a child -> its preload directory
}

// start starts the agents of hosts' subtree roots.
func (s *spawner) start(hosts []target) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.route == nil {
		s.route, s.dirs = map[int]*link{}, map[int]string{}
	}
	if s.agentTimeout > 0 && s.stopAlive == nil {
		s.stopAlive = make(chan struct{})
		go s.keepalive(s.agentTimeout, s.stopAlive)
	}
	for _, g := range splitTree(hosts, s.radix) {
		head := g[0]
		remote := []string{s.remote.Gorun, agentFlag}
		argv := s.remote.Command(head.Name, head.Dest, remote)
		var pre func() ([]string, error)
		if s.preload != nil {
			pre = func() ([]string, error) {
				dir, err := preload(s.remote, head, s.preload)
				if err != nil {
					return nil, err
				}
				s.mu.Lock()
				s.dirs[head.Index] = dir
				s.mu.Unlock()
				gorun := s.remote.Gorun
				if hasGorun(s.preload) {
					gorun = dir + "/" + preloadGorun
				}
				return s.remote.Command(head.Name, head.Dest, []string{gorun, agentFlag}), nil
			}
		}
		l := startLink(head, argv, pre, s.logf, s.fromChild, s.childLost)
		s.links = append(s.links, l)
		for _, t := range g {
			s.route[t.Index] = l
		}
	}
}

// fromChild passes a frame up, stamping a direct child's hello.
func (s *spawner) fromChild(l *link, f frame) {
	if f.Type == frameAlive {
		return // the link has counted it
	}
	if f.Type == frameHello && f.Host == 0 {
		var h helloMsg
		if f.decode(&h) == nil {
			h.Via = s.via
			f = jsonFrame(frameHello, l.t.Index, 0, h)
		}
	}
	s.up(f)
}

// childLost reports a child's end. Status 127 is the remote shell's
// "command not found": gorun is not at its path on that host.
func (s *spawner) childLost(l *link, reason string) {
	if l.code == exitNotFound && s.remote.Mode == modeSSH && !hasGorun(s.preload) {
		reason += fmt.Sprintf("; gorun starts each host's agent as %s there: install the same gorun at that path on every host (as on a shared file system), or give --preload to copy it", s.remote.Gorun)
	}
	s.lost(l.t.Index, reason)
}

// exitNotFound is a shell's status for a command it did not find.
const exitNotFound = 127

// send routes f to the child whose subtree holds f.Host; false if none.
// The setup of a child this node preloaded gets the child's preload
// directory stamped, which only this node knows.
func (s *spawner) send(f frame) bool {
	s.mu.Lock()
	l, dir := s.route[f.Host], s.dirs[f.Host]
	s.mu.Unlock()
	if l == nil {
		return false
	}
	if f.Type == frameSetup && dir != "" {
		var m setupMsg
		if f.decode(&m) == nil {
			m.PreloadDir = dir
			f = jsonFrame(frameSetup, f.Host, f.Rank, m)
		}
	}
	l.send(f)
	return true
}

// close ends every child's input, waits up to wait for them to exit, and
// kills those still running.
func (s *spawner) close(wait time.Duration) {
	s.mu.Lock()
	links := s.links
	if s.stopAlive != nil {
		close(s.stopAlive)
		s.stopAlive = nil
	}
	s.mu.Unlock()
	for _, l := range links {
		l.close()
	}
	deadline := time.After(wait)
	for _, l := range links {
		select {
		case <-l.done:
		case <-deadline:
			for _, l := range links {
				l.kill()
			}
			for _, l := range links {
				<-l.done
			}
			return
		}
	}
}

// subtreeOf returns, for every host, the hosts below it in the spawn tree
// and its parent's name ("" for the launcher).
func subtreeOf(hosts []target, radix int, parent string, sub map[int][]target, parents map[int]string) {
	for _, g := range splitTree(hosts, radix) {
		sub[g[0].Index] = g[1:]
		parents[g[0].Index] = parent
		subtreeOf(g[1:], radix, g[0].Name, sub, parents)
	}
}
