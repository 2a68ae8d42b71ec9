// Package mem is the in-process transport: the N ranks of a test are
// goroutines of one process and a message is one copy from the sender's
// buffer into the receiver's. It implements the same surface as net/tcp and
// net/shm, so every layer above can be tested without sockets.
package mem
