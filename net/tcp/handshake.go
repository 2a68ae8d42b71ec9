package tcp

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// The handshake, before any frame:
//
//	dialer   -> acceptor  hello:   magic, from, to, nonceD
//	acceptor -> dialer    reply:   magic, from, to, nonceA, HMAC(acceptor label, ...)
//	dialer   -> acceptor  proof:   HMAC(dialer label, ...)
//	acceptor -> dialer    verdict: verdictAccept or verdictReject
//
// Both MACs cover both nonces and both ranks, keyed with the job secret; the
// labels keep one direction's MAC from being replayed as the other's.
const (
	handshakeMagic = uint32('g') | uint32('r')<<8 | uint32('H')<<16 | uint32(1)<<24
	nonceSize      = 32
	macSize        = sha256.Size
	helloSize      = 12 + nonceSize
	replySize      = helloSize + macSize

	verdictReject byte = 0
	verdictAccept byte = 1

	labelAcceptor = "gorun/net/tcp acceptor v1"
	labelDialer   = "gorun/net/tcp dialer v1"
)

// Handshake errors.
var (
	// errAuth means the other side does not hold the job secret.
	errAuth = errors.New("authentication failed: the other side does not hold this job's secret")
	// errRejected means the acceptor kept a connection of its own instead.
	errRejected = errors.New("connection rejected by the peer")
)

// hello is the first message of either side; the acceptor's also carries
// its MAC.
type hello struct {
	from, to uint32
	nonce    [nonceSize]byte
}

func (h *hello) put(b []byte) {
	binary.LittleEndian.PutUint32(b[0:4], handshakeMagic)
	binary.LittleEndian.PutUint32(b[4:8], h.from)
	binary.LittleEndian.PutUint32(b[8:12], h.to)
	copy(b[12:helloSize], h.nonce[:])
}

func (h *hello) parse(b []byte) error {
	if m := binary.LittleEndian.Uint32(b[0:4]); m != handshakeMagic {
		return fmt.Errorf("not a gorun handshake (magic %#08x)", m)
	}
	h.from = binary.LittleEndian.Uint32(b[4:8])
	h.to = binary.LittleEndian.Uint32(b[8:12])
	copy(h.nonce[:], b[12:helloSize])
	return nil
}

// mac computes the MAC of one direction over both nonces and both ranks.
func mac(secret []byte, label string, dialer, acceptor *hello) []byte {
	m := hmac.New(sha256.New, secret)
	io.WriteString(m, label)
	m.Write(dialer.nonce[:])
	m.Write(acceptor.nonce[:])
	var ranks [8]byte
	binary.LittleEndian.PutUint32(ranks[0:4], dialer.from)
	binary.LittleEndian.PutUint32(ranks[4:8], acceptor.from)
	m.Write(ranks[:])
	return m.Sum(nil)
}

// dialHandshake runs the dialer's side on c, as rank me calling rank peer.
// It returns nil once accepted, errRejected when the acceptor keeps another
// connection, errAuth when the acceptor fails to prove the secret.
func dialHandshake(c net.Conn, secret []byte, me, peer int) error {
	d := hello{from: uint32(me), to: uint32(peer)}
	if _, err := rand.Read(d.nonce[:]); err != nil {
		return err
	}
	var buf [replySize]byte
	d.put(buf[:helloSize])
	if _, err := c.Write(buf[:helloSize]); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, buf[:]); err != nil {
		return fmt.Errorf("reading handshake reply: %w", err)
	}
	var a hello
	if err := a.parse(buf[:]); err != nil {
		return fmt.Errorf("%w: %v", errAuth, err)
	}
	if a.from != d.to || a.to != d.from {
		return fmt.Errorf("%w: answered as rank %d to rank %d", errAuth, a.from, a.to)
	}
	if !hmac.Equal(buf[helloSize:], mac(secret, labelAcceptor, &d, &a)) {
		return errAuth
	}
	if _, err := c.Write(mac(secret, labelDialer, &d, &a)); err != nil {
		return err
	}
	if _, err := io.ReadFull(c, buf[:1]); err != nil {
		return fmt.Errorf("reading handshake verdict: %w", err)
	}
	if buf[0] != verdictAccept {
		return errRejected
	}
	return nil
}

// acceptHandshake runs the acceptor's side on c for rank me of a job of
// size ranks. It returns the authenticated rank of the dialer; the caller
// then writes the verdict.
func acceptHandshake(c net.Conn, secret []byte, me, size int) (int, error) {
	var buf [replySize]byte
	// The magic first, so that a stranger's short request is refused at
	// once instead of at the handshake timeout.
	if _, err := io.ReadFull(c, buf[:4]); err != nil {
		return -1, fmt.Errorf("reading hello: %w", err)
	}
	if m := binary.LittleEndian.Uint32(buf[0:4]); m != handshakeMagic {
		return -1, fmt.Errorf("not a gorun handshake (magic %#08x)", m)
	}
	if _, err := io.ReadFull(c, buf[4:helloSize]); err != nil {
		return -1, fmt.Errorf("reading hello: %w", err)
	}
	var d hello
	if err := d.parse(buf[:helloSize]); err != nil {
		return -1, err
	}
	if int(d.to) != me || int64(d.from) >= int64(size) || int(d.from) == me {
		return -1, fmt.Errorf("hello from rank %d to rank %d: this is rank %d of %d", d.from, d.to, me, size)
	}
	a := hello{from: uint32(me), to: d.from}
	if _, err := rand.Read(a.nonce[:]); err != nil {
		return -1, err
	}
	a.put(buf[:helloSize])
	copy(buf[helloSize:], mac(secret, labelAcceptor, &d, &a))
	if _, err := c.Write(buf[:]); err != nil {
		return -1, err
	}
	if _, err := io.ReadFull(c, buf[:macSize]); err != nil {
		return -1, fmt.Errorf("%w: reading proof: %v", errAuth, err)
	}
	if !hmac.Equal(buf[:macSize], mac(secret, labelDialer, &d, &a)) {
		return -1, errAuth
	}
	return int(d.from), nil
}
