// Package testhost prepares and tidies the machine that gorun's launch test
// rigs (netnstest, slurmtest) run on: it checks for root, installs the
// Debian packages a rig needs, finds and kills the processes a rig leaves,
// and sweeps the temp dirs of rigs whose test binary died without closing
// them.
//
// Everything here acts on the whole machine and most of it needs root; it
// is meant for test rigs, never for gorun itself. Functions that cannot
// prepare the machine return the reason as one line, for the rig to pass
// to t.Skip.
package testhost
