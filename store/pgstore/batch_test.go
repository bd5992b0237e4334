package pgstore_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
)

// batchCounter counts the pgx batches sent on a pool.
type batchCounter struct{ n atomic.Int64 }

func (b *batchCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (b *batchCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (b *batchCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceBatchStartData) context.Context {
	b.n.Add(1)
	return ctx
}
func (b *batchCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (b *batchCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// poolWith returns a pool on dsn whose config change adjusts.
func poolWith(t testing.TB, dsn string, change func(*pgxpool.Config)) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(dsn)
	if err != nil {
		t.Fatal(err)
	}
	change(cfg)
	p, err := pgxpool.NewWithConfig(bg, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p
}

// A batch of ops goes out as one pgx batch, and runs as one transaction:
// every row it writes carries the same transaction id.
func TestBatchIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	var count batchCounter
	pool := poolWith(t, shared.DSN("postgres"), func(c *pgxpool.Config) { c.ConnConfig.Tracer = &count })
	s := newStore(t, pool, pgstore.Options{})
	var keys []string
	for i := range 50 {
		keys = append(keys, fmt.Sprint("b", 49-i)) // out of order: the store sorts them
	}
	ops := claims(keys...)
	ops = append(ops, claims(keys[0])...) // the same key again, later in the batch
	ops[len(ops)-1].Claim.Owner = "other"
	before := count.n.Load()
	store.Run(bg, s, ops)
	if n := count.n.Load() - before; n != 1 {
		t.Fatalf("%d batches for one store batch, want 1", n)
	}
	for _, op := range ops[:50] {
		if op.Err != nil || op.Result.Status != store.Claimed {
			t.Fatalf("claim of %s: %v %v", op.Key, op.Result.Status, op.Err)
		}
	}
	if last := ops[50]; last.Err != nil || last.Result.Status != store.InProgress {
		t.Fatalf("second claim of %s in the batch: %v %v, want in progress", last.Key, last.Result.Status, last.Err)
	}
	var xids int
	if err := pool.QueryRow(bg, "SELECT count(DISTINCT xmin::text) FROM "+s.Table()).Scan(&xids); err != nil || xids != 1 {
		t.Fatalf("the batch's rows come from %d transactions (%v), want 1", xids, err)
	}
}

// proxy sits between a pool and the server; when armed, it swallows the
// next reply from the server, and closes that connection a little later,
// once the server is done with the request: a reply lost after the
// request ran.
type proxy struct {
	addr  string
	armed atomic.Bool
	drops atomic.Int32
	// swallowed is the last reply the proxy swallowed.
	swallowed atomic.Pointer[[]byte]
	l         net.Listener
	target    string
	wg        sync.WaitGroup
	mu        sync.Mutex
	conns     []net.Conn
}

func startProxy(t testing.TB, target string) *proxy {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{addr: l.Addr().String(), l: l, target: target}
	p.wg.Go(p.accept)
	t.Cleanup(func() {
		l.Close()
		p.mu.Lock()
		for _, c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		p.wg.Wait()
	})
	return p
}

func (p *proxy) accept() {
	for {
		client, err := p.l.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.target)
		if err != nil {
			client.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, client, server)
		p.mu.Unlock()
		p.wg.Go(func() {
			_, _ = io.Copy(server, client)
			server.Close()
		})
		p.wg.Go(func() { p.replies(client, server) })
	}
}

// replies copies the server's replies to the client, but for the one the
// proxy is armed for.
func (p *proxy) replies(client, server net.Conn) {
	defer client.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := server.Read(buf)
		if err != nil {
			return
		}
		if p.armed.CompareAndSwap(true, false) {
			_ = server.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			rest, _ := io.ReadAll(server) // the rest of the reply, up to the commit
			reply := append(buf[:n:n], rest...)
			p.swallowed.Store(&reply)
			p.drops.Add(1)
			server.Close()
			return
		}
		if _, err := client.Write(buf[:n]); err != nil {
			return
		}
	}
}

// ranAndCommitted reports whether the reply p swallowed ends the batch
// with a ReadyForQuery out of any transaction: the batch ran, and
// committed, before its reply was lost.
func (p *proxy) ranAndCommitted() bool {
	r := p.swallowed.Load()
	return r != nil && bytes.HasSuffix(*r, []byte("Z\x00\x00\x00\x05I")) && !bytes.Contains(*r, []byte("SERROR"))
}

// lossyStore returns a store whose pool (of one connection, on which the
// store's statements are prepared already) goes through a proxy, and a
// store on the same table that does not.
func lossyStore(t testing.TB) (*proxy, *pgstore.Store, *pgstore.Store) {
	t.Helper()
	p := startProxy(t, net.JoinHostPort(shared.Host, strconv.Itoa(shared.Port)))
	host, port, _ := net.SplitHostPort(p.addr)
	dsn := fmt.Sprintf("host=%s port=%s user=postgres dbname=postgres sslmode=disable", host, port)
	lossy := poolWith(t, dsn, func(c *pgxpool.Config) {
		c.MaxConns = 1
		c.ShouldPing = func(context.Context, pgxpool.ShouldPingParams) bool { return false }
	})
	direct := newStore(t, sharedPool(t), pgstore.Options{})
	table := direct.Table()
	s := newStore(t, lossy, pgstore.Options{Table: table[1 : len(table)-1]})
	// Prepare every statement on the connection, so that the swallowed
	// reply is the batch's own, not that of its statements' preparation.
	tok := claimKey(t, s, "warm", "w")
	if err := s.Renew(bg, "warm", tok, time.Hour); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(bg, "warm", tok, store.Record{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	return p, s, direct
}

var req = store.ClaimRequest{Owner: "a", Lease: time.Hour, TTL: time.Hour}

// A claim whose reply is lost after it ran is sent again, and the repeat
// finds the claim its first copy made: one claim, not two.
func TestLostClaimReplyIsRepeated(t *testing.T) {
	t.Parallel()
	p, s, direct := lossyStore(t)
	p.armed.Store(true)
	res, err := s.Claim(bg, "k", req)
	if err != nil || res.Status != store.Claimed || res.Token.Owner != "a" || res.Attempt != 1 {
		t.Fatalf("claim: %v %+v %v; want claimed by a, attempt 1", res.Status, res.Token, err)
	}
	if p.drops.Load() != 1 || !p.ranAndCommitted() {
		t.Fatalf("%d replies dropped (the batch ran: %v), want 1 that ran", p.drops.Load(), p.ranAndCommitted())
	}
	if e, err := direct.Inspect(bg, "k"); err != nil || e.State != store.Held || e.Token != res.Token {
		t.Fatalf("Inspect: %+v %v", e, err)
	}
}

// A completion whose reply is lost is not sent again by the store: its
// caller gets an error that is not ErrLeaseLost (the key is completed), and
// completing again replays the record.
func TestLostCompleteReplyIsAnError(t *testing.T) {
	t.Parallel()
	p, s, direct := lossyStore(t)
	res, err := s.Claim(bg, "k", req)
	if err != nil {
		t.Fatal(err)
	}
	p.armed.Store(true)
	_, err = s.Complete(bg, "k", res.Token, store.Record{Value: []byte("v")}, time.Hour)
	if err == nil || errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Complete with its reply lost: %v, want the lost reply's error", err)
	}
	if e, err := direct.Inspect(bg, "k"); err != nil || e.State != store.Done {
		t.Fatalf("Inspect: %+v %v; want the completion that ran", e, err)
	}
	rec, err := s.Complete(bg, "k", res.Token, store.Record{Value: []byte("other")}, time.Hour)
	if err != nil || string(rec.Value) != "v" {
		t.Fatalf("Complete again: %q %v, want the stored record", rec.Value, err)
	}
}

// A release whose reply is lost is not sent again: a repeat that found
// another owner's claim would answer ErrLeaseLost, though it released the
// key.
func TestLostReleaseReplyIsAnError(t *testing.T) {
	t.Parallel()
	p, s, direct := lossyStore(t)
	res, err := s.Claim(bg, "k", req)
	if err != nil {
		t.Fatal(err)
	}
	p.armed.Store(true)
	if err := s.Release(bg, "k", res.Token); err == nil || errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Release with its reply lost: %v, want the lost reply's error", err)
	}
	if e, err := direct.Inspect(bg, "k"); err != nil || e.State != store.Absent {
		t.Fatalf("Inspect: %+v %v; want the release that ran", e, err)
	}
}

// A renewal whose reply is lost is sent again, and renews again.
func TestLostRenewReplyIsRepeated(t *testing.T) {
	t.Parallel()
	p, s, _ := lossyStore(t)
	res, err := s.Claim(bg, "k", req)
	if err != nil {
		t.Fatal(err)
	}
	p.armed.Store(true)
	if err := s.Renew(bg, "k", res.Token, time.Hour); err != nil {
		t.Fatalf("Renew with its reply lost: %v", err)
	}
	if p.drops.Load() != 1 || !p.ranAndCommitted() {
		t.Fatalf("%d replies dropped (the batch ran: %v), want 1 that ran", p.drops.Load(), p.ranAndCommitted())
	}
}

// A Forget in a batch says whether it deleted a result.
func TestForgetSaysWhetherItDeleted(t *testing.T) {
	t.Parallel()
	s := newStore(t, sharedPool(t), pgstore.Options{})
	done := claimKey(t, s, "done", "o")
	if _, err := s.Complete(bg, "done", done, store.Record{Failed: true, Error: "declined"}, time.Hour); err != nil {
		t.Fatal(err)
	}
	released := claimKey(t, s, "released", "o")
	if err := s.Release(bg, "released", released); err != nil {
		t.Fatal(err)
	}
	claimKey(t, s, "held", "o")
	ops := []*store.Op{{Kind: store.OpForget, Key: "done"}, {Kind: store.OpForget, Key: "released"},
		{Kind: store.OpForget, Key: "absent"}, {Kind: store.OpForget, Key: "held"}, {Kind: store.OpForget, Key: "done"}}
	for _, op := range ops {
		op.Result.Status = store.Completed // as a caller counting deletions starts them
	}
	store.Run(bg, s, ops)
	want := []store.Status{store.Completed, 0, 0, 0, 0}
	for i, op := range ops {
		if op.Result.Status != want[i] || (op.Err != nil) != (op.Key == "held") {
			t.Errorf("Forget(%s) #%d: status %v, err %v; want status %v", op.Key, i, op.Result.Status, op.Err, want[i])
		}
	}
	if !errors.Is(ops[3].Err, store.ErrInProgress) {
		t.Errorf("Forget of a held key: %v", ops[3].Err)
	}
}
