package pgstore

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
)

// The listener's timing: how long a connection attempt may take, how
// often an idle connection is checked (a server that vanished without
// closing the socket sends nothing, and LISTEN would wait forever), how
// long a check or a LISTEN may take, and the waits between reconnection
// attempts.
const (
	connectTimeout = 10 * time.Second
	pingEvery      = 30 * time.Second
	commandTimeout = 5 * time.Second
	firstRetry     = 20 * time.Millisecond
	maxRetry       = time.Second
)

// listener owns the store's listening connection: a connection taken
// from the pool for good (hijacked), on which it LISTENs to the channel of
// every subscription and waits for notifications. A goroutine runs it from
// the first Subscribe until the last subscription stops.
type listener struct {
	s      *Store
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{}

	mu        sync.Mutex
	reqs      []listenReq
	interrupt context.CancelFunc // ends the wait under way; nil if none
}

// listenReq asks the listener to LISTEN to a channel (done receives the
// outcome) or to UNLISTEN it (done is nil).
type listenReq struct {
	channel string
	done    chan error
}

func newListener(s *Store) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	return &listener{s: s, ctx: ctx, cancel: cancel, done: make(chan struct{})}
}

// listen asks for a LISTEN on channel; the channel returned receives nil
// once it listens, or the error that prevented it.
func (l *listener) listen(channel string) <-chan error {
	done := make(chan error, 1)
	l.request(listenReq{channel: channel, done: done})
	return done
}

// unlisten asks for an UNLISTEN of channel, and does not wait.
func (l *listener) unlisten(channel string) { l.request(listenReq{channel: channel}) }

func (l *listener) request(r listenReq) {
	l.mu.Lock()
	l.reqs = append(l.reqs, r)
	stop := l.interrupt
	l.mu.Unlock()
	if stop != nil {
		stop()
	}
}

// take returns the pending requests and forgets them.
func (l *listener) take() []listenReq {
	l.mu.Lock()
	defer l.mu.Unlock()
	reqs := l.reqs
	l.reqs = nil
	return reqs
}

// close stops the listener and waits until its goroutine is done.
func (l *listener) close() {
	l.cancel()
	<-l.done
}

// run listens until the listener is closed. When the connection fails it
// connects again, after a pause that doubles up to a second; once it
// listens again it reports wake-up "" to every subscription.
func (l *listener) run() {
	defer close(l.done)
	var conn *pgx.Conn
	defer func() {
		if conn != nil {
			closeConn(conn)
		}
		answer(l.take(), errClosed)
	}()
	lost := false
	retry := firstRetry
	for l.ctx.Err() == nil {
		if conn == nil {
			// A request is made once its subscription is live, so the
			// channels connect listens to include those of the requests
			// taken here; later ones wait for apply.
			reqs := l.take()
			c, err := l.connect()
			answer(reqs, err)
			if err != nil {
				if !sleep(l.ctx, retry) {
					return
				}
				retry = min(2*retry, maxRetry)
				continue
			}
			conn, retry = c, firstRetry
			if lost {
				lost = false
				l.s.wakeAll()
			}
		}
		if err := l.apply(conn); err != nil || l.wait(conn) != nil {
			closeConn(conn)
			conn, lost = nil, true
		}
	}
}

// answer tells the LISTEN requests of reqs err (nil: they listen), and
// drops its UNLISTENs: a new connection listens only to the channels of
// live subscriptions.
func answer(reqs []listenReq, err error) {
	for _, r := range reqs {
		if r.done != nil {
			r.done <- err
		}
	}
}

// connect takes a connection from the pool for good and listens on it to
// the channel of every subscription.
func (l *listener) connect() (*pgx.Conn, error) {
	ctx, cancel := context.WithTimeout(l.ctx, connectTimeout)
	defer cancel()
	pc, err := l.s.pool.Acquire(ctx)
	if err != nil {
		return nil, err
	}
	conn := pc.Hijack()
	var sql strings.Builder
	for _, ch := range l.s.channels() {
		sql.WriteString("LISTEN " + pgx.Identifier{ch}.Sanitize() + ";")
	}
	if sql.Len() > 0 {
		if _, err := conn.Exec(ctx, sql.String()); err != nil {
			closeConn(conn)
			return nil, err
		}
	}
	return conn, nil
}

// apply runs the pending LISTEN and UNLISTEN requests on conn.
func (l *listener) apply(conn *pgx.Conn) error {
	reqs := l.take()
	for i, r := range reqs {
		verb := "UNLISTEN "
		if r.done != nil {
			verb = "LISTEN "
		}
		ctx, cancel := context.WithTimeout(l.ctx, commandTimeout)
		_, err := conn.Exec(ctx, verb+pgx.Identifier{r.channel}.Sanitize())
		cancel()
		if err != nil {
			// Keep the rest for the next connection, which listens to
			// every live channel anyway.
			l.mu.Lock()
			l.reqs = append(reqs[i:], l.reqs...)
			l.mu.Unlock()
			return err
		}
		if r.done != nil {
			r.done <- nil
		}
	}
	return nil
}

// wait waits for a notification and dispatches it, until a request or
// the periodic check interrupts it. It returns an error when the
// connection failed.
func (l *listener) wait(conn *pgx.Conn) error {
	ctx, cancel := context.WithTimeout(l.ctx, pingEvery)
	defer cancel()
	l.mu.Lock()
	if len(l.reqs) > 0 {
		l.mu.Unlock()
		return nil
	}
	l.interrupt = cancel
	l.mu.Unlock()
	n, err := conn.WaitForNotification(ctx)
	l.mu.Lock()
	l.interrupt = nil
	l.mu.Unlock()
	switch {
	case err == nil:
		l.s.dispatch(n.Channel, n.Payload)
		return nil
	case conn.IsClosed() || ctx.Err() == nil:
		return err
	case l.ctx.Err() != nil || !errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil // closing, or interrupted by a request
	}
	pctx, pcancel := context.WithTimeout(l.ctx, commandTimeout)
	defer pcancel()
	_, err = conn.Exec(pctx, "SELECT 1")
	return err
}

// channels returns the channels of the live subscriptions.
func (s *Store) channels() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]string, 0, len(s.subs))
	for _, sub := range s.subs {
		if !slices.Contains(out, sub.channel) {
			out = append(out, sub.channel)
		}
	}
	return out
}

func closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}
