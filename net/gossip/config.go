package gossip

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"fmt"
	"io"
	"log"
	"net"
	"time"

	"github.com/hashicorp/memberlist"
)

// Timing of the gossip, tuned for a job whose nodes are on one machine or
// one LAN (memberlist's DefaultLocalConfig, made faster):
//
//   - gossipInterval 10ms to gossipNodes 4 peers, each message retransmitted
//     retransmitMult*log10(n+1) times: a join reaches every node in a few
//     ticks instead of the default 100ms ticks.
//   - probeInterval 200ms, probeTimeout 100ms: each node probes one peer
//     every 200ms, so a dead peer is first probed within about 200ms.
//   - suspicionMult 3, suspicionMaxMult 2: a suspect is declared dead after
//     3*max(1,log10(n))*200ms = 600ms (fewer than 10 nodes), at most 1.2s
//     without confirmations from others. Death of a process is thus reported
//     within about 1-1.5s on loopback.
//   - lossGrace: a lost node that did not announce a graceful leave is
//     reported as failed this long after memberlist declared it gone, in
//     case its leave announcement is still on the way.
const (
	gossipInterval   = 10 * time.Millisecond
	gossipNodes      = 4
	retransmitMult   = 4
	probeInterval    = 200 * time.Millisecond
	probeTimeout     = 100 * time.Millisecond
	suspicionMult    = 3
	suspicionMaxMult = 2
	pushPullInterval = 5 * time.Second
	tcpTimeout       = time.Second
	leaveTimeout     = 500 * time.Millisecond
	lossGrace        = 100 * time.Millisecond

	retryMin = 10 * time.Millisecond  // first join retry / state pull while waiting
	retryMax = 500 * time.Millisecond // longest pause between them

	maxCrowd = 20 // the most Config.Crowd slows gossip by: 200ms ticks, 4s probes
)

// crowded scales d by cfg's crowd, up to maxCrowd.
func crowded(cfg Config, d time.Duration) time.Duration {
	return d * time.Duration(min(max(cfg.Crowd, 1), maxCrowd))
}

// keyLabel is the HMAC message that derives the memberlist key from the
// job's secret.
const keyLabel = "gorun gossip key"

// gossipKey derives the 32-byte memberlist (AES-256) key from the secret.
func gossipKey(secret []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(keyLabel))
	return h.Sum(nil)
}

// validate checks cfg and fills in defaults.
func (cfg *Config) validate() error {
	if cfg.JobID == "" || len(cfg.JobID) > 255 {
		return fmt.Errorf("%w: JobID %q: want 1 to 255 bytes (GORUN_JOB_ID)", ErrConfig, cfg.JobID)
	}
	if len(cfg.Secret) == 0 {
		return fmt.Errorf("%w: no Secret: the job's gossip must be keyed (GORUN_SECRET)", ErrConfig)
	}
	if cfg.BindAddr == "" {
		cfg.BindAddr = "127.0.0.1"
	}
	if net.ParseIP(cfg.BindAddr) == nil {
		return fmt.Errorf("%w: BindAddr %q is not an IP address", ErrConfig, cfg.BindAddr)
	}
	if cfg.BindPort < 0 || cfg.BindPort > 65535 {
		return fmt.Errorf("%w: BindPort %d out of range", ErrConfig, cfg.BindPort)
	}
	return nil
}

// memberlistConfig builds the memberlist configuration of node name, with
// c as every delegate.
func memberlistConfig(cfg Config, name string, c *core) *memberlist.Config {
	mc := memberlist.DefaultLocalConfig()
	mc.Name = name
	mc.BindAddr = cfg.BindAddr
	mc.BindPort = cfg.BindPort
	mc.AdvertisePort = cfg.BindPort
	mc.Label = cfg.JobID
	mc.SecretKey = gossipKey(cfg.Secret)
	mc.GossipVerifyIncoming = true
	mc.GossipVerifyOutgoing = true
	mc.EnableCompression = false

	mc.GossipInterval = crowded(cfg, gossipInterval)
	mc.GossipNodes = gossipNodes
	mc.RetransmitMult = retransmitMult
	mc.ProbeInterval = crowded(cfg, probeInterval)
	mc.ProbeTimeout = crowded(cfg, probeTimeout)
	mc.SuspicionMult = suspicionMult
	mc.SuspicionMaxTimeoutMult = suspicionMaxMult
	mc.PushPullInterval = pushPullInterval
	mc.TCPTimeout = tcpTimeout

	mc.Delegate = c
	mc.Events = c
	mc.Alive = c
	mc.Conflict = c
	mc.Logger = memberlistLogger(cfg.Logger)
	return mc
}

// memberlistLogger keeps memberlist quiet: silent without a logger, and
// without its [DEBUG] lines (one per connection) with one.
func memberlistLogger(l *log.Logger) *log.Logger {
	if l == nil {
		return log.New(io.Discard, "", 0)
	}
	return log.New(debugFilter{l}, "", 0)
}

type debugFilter struct{ l *log.Logger }

func (f debugFilter) Write(p []byte) (int, error) {
	if !bytes.Contains(p, []byte("[DEBUG]")) {
		f.l.Print(string(bytes.TrimRight(p, "\n")))
	}
	return len(p), nil
}
