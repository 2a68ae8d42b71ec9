package spmd

import (
	"context"
	"unsafe"
)

// Number is the set of element types the typed helpers and the collectives
// of package prims accept.
type Number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~int |
		~uint8 | ~uint16 | ~uint32 | ~uint64 | ~uint |
		~float32 | ~float64
}

// Bytes returns the memory of s as bytes, without copying. Both ranks of a
// message must agree on the element type (and, across hosts, on byte order:
// gorun's supported platforms are all little-endian).
func Bytes[T Number](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// SendSlice sends the elements of s to rank dst with tag.
func SendSlice[T Number](ctx context.Context, c *Comm, dst, tag int, s []T) error {
	return c.Send(ctx, dst, tag, Bytes(s))
}

// RecvSlice receives a message of elements of s's type from rank src with
// tag into s and returns how many elements arrived.
func RecvSlice[T Number](ctx context.Context, c *Comm, src, tag int, s []T) (int, error) {
	n, err := c.Recv(ctx, src, tag, Bytes(s))
	var z T
	return n / int(unsafe.Sizeof(z)), err
}

// IsendSlice starts sending the elements of s to rank dst with tag.
func IsendSlice[T Number](ctx context.Context, c *Comm, dst, tag int, s []T) *Request {
	return c.Isend(ctx, dst, tag, Bytes(s))
}

// IrecvSlice posts a receive into the elements of s from rank src with tag.
// The request's count is in bytes.
func IrecvSlice[T Number](c *Comm, src, tag int, s []T) *Request {
	return c.Irecv(src, tag, Bytes(s))
}
