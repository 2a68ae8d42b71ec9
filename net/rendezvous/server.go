package rendezvous

import (
	"bufio"
	"context"
	"crypto/hmac"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log"
	"math"
	"net"
	"slices"
	"sync"
	"time"
)

// Server is the job's rendezvous, run by the launcher. Its methods are
// safe for concurrent use.
type Server struct {
	ln     net.Listener
	jobID  string
	secret []byte
	size   int
	logf   func(format string, args ...any)

	mu      sync.Mutex
	recs    map[int]Record
	waiting []*waiter // ranks registered and waiting for the table
	table   []byte    // once every rank registered
	full    chan struct{}
	done    chan struct{} // closed by Close
	// deadline is the earliest moment a registered rank gives up; early
	// says it moved.
	deadline time.Time
	early    chan struct{}
	closed   bool
	open     map[net.Conn]bool // every connection being served, for Close
	conns    sync.WaitGroup
}

// waiter is one registered rank's connection.
type waiter struct {
	c  net.Conn
	mu sync.Mutex // serialises writes
}

// handshakeTimeout bounds how long a connection may take to register.
const handshakeTimeout = 30 * time.Second

// Listen starts a job's rendezvous on ln, which it owns from then on. The
// job's size is the first registered rank's; a rank that says another is
// refused. logger may be nil.
func Listen(ln net.Listener, jobID string, secret []byte, logger *log.Logger) *Server {
	s := &Server{ln: ln, jobID: jobID, secret: secret, recs: map[int]Record{}, open: map[net.Conn]bool{}, full: make(chan struct{}), done: make(chan struct{}), early: make(chan struct{}, 1), logf: func(string, ...any) {}}
	if logger != nil {
		s.logf = logger.Printf
	}
	s.conns.Add(1)
	go s.accept()
	return s
}

// Addr returns the "ip:port" ranks register with.
func (s *Server) Addr() string { return s.ln.Addr().String() }

func (s *Server) accept() {
	defer s.conns.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return // closed
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return
		}
		s.open[c] = true
		s.conns.Add(1)
		s.mu.Unlock()
		go func() {
			defer s.conns.Done()
			s.serve(c)
			s.mu.Lock()
			delete(s.open, c)
			s.mu.Unlock()
		}()
	}
}

// serve registers one rank and answers its asks until the table is out.
func (s *Server) serve(c net.Conn) {
	keep := false
	defer func() {
		if !keep {
			c.Close()
		}
	}()
	c.SetDeadline(time.Now().Add(handshakeTimeout))
	r := bufio.NewReader(c)
	rec, size, err := s.handshake(c, r)
	if err != nil {
		s.logf("rendezvous: %s: %v", c.RemoteAddr(), err)
		writeMsg(c, msgError, []byte(err.Error()))
		return
	}
	c.SetDeadline(time.Time{})
	w := &waiter{c: c}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	if s.size == 0 {
		s.size = size
	}
	if size != s.size {
		s.mu.Unlock()
		err := fmt.Errorf("%w: rank %d (pid %d on %s) is of a job of %d ranks, but the ranks before it said %d", ErrRefused, rec.Rank, rec.Pid, rec.Hostname, size, s.size)
		writeMsg(c, msgError, []byte(err.Error()))
		return
	}
	if old, dup := s.recs[rec.Rank]; dup {
		s.mu.Unlock()
		err := fmt.Errorf("%w: rank %d registered twice: by pid %d on %s and by pid %d on %s", ErrRefused, rec.Rank, old.Pid, old.Hostname, rec.Pid, rec.Hostname)
		writeMsg(c, msgError, []byte(err.Error()))
		return
	}
	s.recs[rec.Rank] = rec
	if rec.wait > 0 {
		if dl := time.Now().Add(rec.wait); s.deadline.IsZero() || dl.Before(s.deadline) {
			s.deadline = dl
			select {
			case s.early <- struct{}{}:
			default:
			}
		}
	}
	var send []*waiter
	table := s.table
	if table == nil {
		s.waiting = append(s.waiting, w)
		if len(s.recs) == s.size {
			recs := make([]Record, 0, s.size)
			for i := range s.size {
				recs = append(recs, s.recs[i])
			}
			s.table = encodeTable(recs)
			table, send, s.waiting = s.table, s.waiting, nil
			close(s.full)
		}
	}
	s.mu.Unlock()
	if send != nil {
		s.logf("rendezvous: all %d ranks registered; sending the table (%d bytes)", s.size, len(table))
		s.broadcast(send, table)
		return // the waiters' own goroutines close their connections
	}
	keep = true
	// Wait for the table (another goroutine sends it and closes c) or
	// answer asks for the missing ranks.
	one := make([]byte, 1)
	for {
		if _, err := io.ReadFull(r, one); err != nil {
			return // the table went out and c closed, or the rank left
		}
		if one[0] != askMissing {
			return
		}
		s.mu.Lock()
		var missing []int
		for i := range s.size {
			if _, ok := s.recs[i]; !ok {
				missing = append(missing, i)
			}
		}
		s.mu.Unlock()
		w.mu.Lock()
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		err := writeMsg(c, msgMissing, encodeRanks(missing))
		w.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// broadcast sends the table to every waiter, a goroutine each, and closes
// their connections.
func (s *Server) broadcast(ws []*waiter, table []byte) {
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.mu.Lock()
			w.c.SetWriteDeadline(time.Now().Add(handshakeTimeout))
			if err := writeMsg(w.c, msgTable, table); err != nil {
				s.logf("rendezvous: sending the table to %s: %v", w.c.RemoteAddr(), err)
			}
			w.mu.Unlock()
			w.c.Close()
		}()
	}
	wg.Wait()
}

// handshake checks magic, job and MAC and reads the rank's job size and
// record.
func (s *Server) handshake(c net.Conn, r *bufio.Reader) (Record, int, error) {
	head := make([]byte, len(magic))
	if _, err := io.ReadFull(r, head); err != nil {
		return Record{}, 0, fmt.Errorf("reading the greeting: %w", err)
	}
	if string(head) != magic {
		return Record{}, 0, fmt.Errorf("%w: not a gorun rank (greeting %q)", ErrRefused, head)
	}
	job, err := readString(r)
	if err != nil {
		return Record{}, 0, err
	}
	size, err := readUvarint(r, maxRanks)
	if err != nil {
		return Record{}, 0, err
	}
	wait, err := readUvarint(r, math.MaxInt32)
	if err != nil {
		return Record{}, 0, err
	}
	nonce := newNonce()
	if _, err := c.Write(nonce); err != nil {
		return Record{}, 0, err
	}
	sum := make([]byte, 32)
	if _, err := io.ReadFull(r, sum); err != nil {
		return Record{}, 0, fmt.Errorf("reading the proof: %w", err)
	}
	if job != s.jobID || !hmac.Equal(sum, mac(s.secret, s.jobID, nonce)) {
		return Record{}, 0, fmt.Errorf("%w: another job, or not the job's secret (job %q)", ErrRefused, job)
	}
	if size < 1 {
		return Record{}, 0, fmt.Errorf("%w: a job of %d ranks", ErrRefused, size)
	}
	n, err := readUvarint(r, 6*maxString+64)
	if err != nil {
		return Record{}, 0, err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return Record{}, 0, err
	}
	d := decoder{b: b}
	rec := d.record(int(size))
	if d.err == nil && len(d.b) != 0 {
		d.fail("%d bytes after the record", len(d.b))
	}
	if d.err != nil {
		return Record{}, 0, fmt.Errorf("%w: a corrupt record: %v", ErrRefused, d.err)
	}
	rec.wait = time.Duration(wait) * time.Millisecond
	return rec, int(size), nil
}

// Wait blocks until every rank has registered, and returns the table.
func (s *Server) Wait(ctx context.Context) ([]Record, error) {
	select {
	case <-s.full:
	case <-s.done:
		return nil, ErrClosed
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	recs := make([]Record, 0, s.size)
	for i := range s.size {
		r := s.recs[i]
		r.wait = 0
		recs = append(recs, r)
	}
	return recs, nil
}

// Watch blocks until every rank has registered (nil, nil) or until the
// first registered rank would give up waiting for the others, and then
// returns the ranks still missing, ascending.
func (s *Server) Watch(ctx context.Context) ([]int, error) {
	for {
		s.mu.Lock()
		dl := s.deadline
		s.mu.Unlock()
		var fire <-chan time.Time
		t := time.NewTimer(time.Until(dl))
		if !dl.IsZero() {
			fire = t.C
		}
		stop := func() { t.Stop() }
		select {
		case <-s.full:
			stop()
			return nil, nil
		case <-s.done:
			stop()
			return nil, ErrClosed
		case <-ctx.Done():
			stop()
			return nil, ctx.Err()
		case <-s.early:
			stop()
		case <-fire:
			select {
			case <-s.full:
				return nil, nil
			default:
			}
			return s.Missing(), nil
		}
	}
}

// Missing returns the ranks that have not registered, ascending; nil
// before the first has (the size is not known yet).
func (s *Server) Missing() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var m []int
	for i := range s.size {
		if _, ok := s.recs[i]; !ok {
			m = append(m, i)
		}
	}
	return slices.Clip(m)
}

// Close stops the server and closes the connections of ranks still
// waiting; it waits for its goroutines. It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	s.waiting = nil
	for c := range s.open {
		c.Close()
	}
	s.mu.Unlock()
	err := s.ln.Close()
	s.conns.Wait()
	return err
}

func readUvarint(r *bufio.Reader, max uint64) (uint64, error) {
	v, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, fmt.Errorf("reading a number: %w", err)
	}
	if v > max {
		return 0, fmt.Errorf("%w: a number out of range (%d)", ErrRefused, v)
	}
	return v, nil
}

func readString(r *bufio.Reader) (string, error) {
	n, err := readUvarint(r, maxString)
	if err != nil {
		return "", err
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		return "", fmt.Errorf("reading a string: %w", err)
	}
	return string(b), nil
}
