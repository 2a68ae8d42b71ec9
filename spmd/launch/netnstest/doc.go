// Package netnstest builds a multi-host test rig out of Linux network
// namespaces, for tests of launchers that reach their hosts over SSH.
//
// New(t, 3) creates three namespaces, h1 to h3, each joined by a veth pair
// to a private bridge and given an address in a /24 chosen from
// 198.18.0.0/15 (the range set aside for benchmarking, never routed). The
// bridge has an address in the root namespace too, so a launcher running in
// the test process reaches every host. There are no default routes: nothing
// leaves the rig.
//
// Every host runs a real OpenSSH sshd on port 22 of its address, in its own
// UTS namespace whose hostname is the host's name, so `ssh h2 hostname`
// prints h2 and ranks on different rig hosts see different hostnames. The
// rig generates the host keys and a client key and writes an ssh client
// config; with it
//
//	ssh -F rig.SSHConfig h1 true
//
// (or exec.Command("ssh", append(rig.SSHArgs(), "h1", "true")...)) logs in
// as root without prompts, from the root namespace or from any host. All
// hosts share the machine's filesystem, so paths (a gorun binary, a temp
// dir) are the same everywhere. The rig also writes a hostfile,
// "h1 slots=2" per host.
//
// The rig needs root, iproute2 and openssh-server. As root, missing
// packages are installed with apt-get; without root, or when namespaces
// cannot be made, New skips the test with one line. Close, registered with
// t.Cleanup, kills every process the rig started (by pid) and whatever
// is still running inside its namespaces, and deletes the namespaces,
// links and temp dir. Rigs left behind by a killed test binary are removed
// by the next New.
package netnstest
