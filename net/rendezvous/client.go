package rendezvous

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"strings"
	"time"
)

// Register registers rec with the job's rendezvous at addr and returns
// every rank's record, by rank, once all size ranks have registered. It
// dials until the server answers (with backoff), within ctx. When ctx
// ends first, the error is a *MissingError naming the ranks the server has
// not heard from (errors.Is ErrTimeout where ctx's deadline ended the wait,
// context.Canceled where a cancel did); a refusal wraps ErrRefused.
//
// The rank tells the server how long it waits (ctx's deadline less
// grace), so that the launcher behind the server can give up on the
// missing ranks first (Server.Watch), and say so once for the job, before
// every rank does.
func Register(ctx context.Context, addr, jobID string, secret []byte, rec Record, size int, grace time.Duration) ([]Record, error) {
	if size < 1 || rec.Rank < 0 || rec.Rank >= size {
		return nil, fmt.Errorf("rendezvous: rank %d of size %d: want 0 <= rank < size", rec.Rank, size)
	}
	start := time.Now()
	var c net.Conn
	var reach error
	delay := 5 * time.Millisecond
	for c == nil {
		var d net.Dialer
		conn, err := d.DialContext(ctx, "tcp", addr)
		if err == nil {
			c = conn
			break
		}
		if ctx.Err() != nil {
			return nil, &MissingError{Size: size, Waited: waited(ctx, start), Err: ctx.Err(),
				Reach: fmt.Errorf("the launcher's rendezvous at %s did not answer: %v", addr, reachErr(err, reach))}
		}
		reach = err
		t := time.NewTimer(delay/2 + rand.N(delay/2+1))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl.Add(5 * time.Second)) // the ask below gets its own
	}
	r := bufio.NewReader(c)
	wait := time.Duration(0)
	if dl, ok := ctx.Deadline(); ok {
		wait = max(time.Until(dl)-grace, time.Millisecond)
	}
	if err := hello(c, r, jobID, secret, rec, size, wait); err != nil {
		return nil, fmt.Errorf("rendezvous at %s: %w", addr, err)
	}
	type result struct {
		recs []Record
		err  error
	}
	done := make(chan result, 1)
	missing := make(chan []int, 1)
	go func() {
		for {
			kind, b, err := readMsg(r)
			switch {
			case err != nil:
				done <- result{err: fmt.Errorf("rendezvous at %s: the connection ended before the table came: %w", addr, err)}
				return
			case kind == msgTable:
				recs, err := decodeTable(b, size)
				done <- result{recs, err}
				return
			case kind == msgError:
				done <- result{err: fmt.Errorf("rendezvous at %s: %w: %s", addr, ErrRefused, strings.TrimPrefix(string(b), ErrRefused.Error()+": "))}
				return
			case kind == msgMissing:
				if rs, err := decodeRanks(b, size); err == nil {
					select {
					case missing <- rs:
					default:
					}
				}
			}
		}
	}()
	select {
	case res := <-done:
		return res.recs, res.err
	case <-ctx.Done():
	}
	// Ask which ranks the server still waits for, so that every rank
	// names the same ones.
	e := &MissingError{Size: size, Waited: waited(ctx, start), Err: ctx.Err()}
	// A stopped job's launcher may no longer answer: a cancelled wait
	// asks briefly.
	ask := 2 * time.Second
	if e.stopped() {
		ask = 100 * time.Millisecond
	}
	c.SetDeadline(time.Now().Add(ask))
	// Where the job stopped, an unanswered ask is no news.
	if _, err := c.Write([]byte{askMissing}); err != nil {
		if !e.stopped() {
			e.Reach = fmt.Errorf("asking the rendezvous at %s which ranks are missing: %v", addr, err)
		}
		return nil, e
	}
	select {
	case e.Missing = <-missing:
		if len(e.Missing) == 0 { // every rank arrived meanwhile
			if res := <-done; res.err == nil {
				return res.recs, nil
			}
		}
	case res := <-done:
		if res.err == nil {
			return res.recs, nil
		}
		if !e.stopped() {
			e.Reach = res.err
		}
	}
	return nil, e
}

// hello sends the greeting, proof and record.
func hello(c net.Conn, r *bufio.Reader, jobID string, secret []byte, rec Record, size int, wait time.Duration) error {
	var e encoder
	e.b = append(e.b, magic...)
	e.str(jobID)
	e.uint(uint64(size))
	e.uint(uint64(wait.Milliseconds()))
	if _, err := c.Write(e.b); err != nil {
		return err
	}
	nonce := make([]byte, nonceLen)
	if _, err := io.ReadFull(r, nonce); err != nil {
		return fmt.Errorf("reading the challenge: %w", err)
	}
	var body encoder
	body.record(rec)
	e = encoder{b: mac(secret, jobID, nonce)}
	e.uint(uint64(len(body.b)))
	e.b = append(e.b, body.b...)
	_, err := c.Write(e.b)
	return err
}

func reachErr(err, last error) error {
	if last != nil {
		return last
	}
	return err
}

// waited is how long a rank waited: up to its deadline where that ended
// the wait, else until now (a cancel), rounded.
func waited(ctx context.Context, start time.Time) time.Duration {
	w := time.Since(start)
	if dl, ok := ctx.Deadline(); ok && dl.After(start) && ctx.Err() == context.DeadlineExceeded {
		w = dl.Sub(start)
	}
	if w >= 500*time.Millisecond {
		return w.Round(100 * time.Millisecond)
	}
	return w.Round(time.Millisecond)
}
