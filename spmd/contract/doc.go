// Package contract is what the launcher and a rank agree on: the
// environment gorun (or its agent) gives every rank, the port ranges
// listeners may bind, and the identity of a host. It is a leaf: the
// launcher (spmd/launch) imports it, not the rank runtime (spmd), so that
// gorun does not carry memberlist and the transports it never uses.
package contract
