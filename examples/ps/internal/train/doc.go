// Package train is the parameter-server example's training (on
// strategies/ps), shared by its three programs: examples/ps, one program
// whose first --servers ranks serve, and examples/ps/server and
// examples/ps/worker, which run servers and workers as separate programs
// of one MPMD job, as TensorFlow's ps and worker jobs do:
//
//	gorun -np 4 ./examples/ps --servers 1
//	gorun -np 1 ./examples/ps/server : -np 3 ./examples/ps/worker
//
// In the MPMD form each program knows its role, and the ranks learn the
// job's shape from one another at start (Layout): the servers are the
// first ranks, as many as there are server ranks, and every rank must run
// with the same training flags. A layout that breaks either fails on every
// rank with a message that says how to fix it.
package train
