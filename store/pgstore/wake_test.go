package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/storesuite"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
)

// A caller on instance B waits for the owner on instance A (on pools of
// their own, on one table), and settles as soon as A completes: B's NOTIFY
// wake-up releases it; see storesuite.Wake.
func TestCrossInstanceWake(t *testing.T) {
	t.Parallel()
	dsn, table := shared.DSN("postgres"), newTable()
	storesuite.Wake(t, instance(t, dsn, table), instance(t, dsn, table), nil)
}

// B's wake-ups are hidden: its re-claim timer releases it; see
// storesuite.LostWake.
func TestCrossInstanceLostWake(t *testing.T) {
	t.Parallel()
	dsn, table := shared.DSN("postgres"), newTable()
	storesuite.LostWake(t, instance(t, dsn, table), instance(t, dsn, table))
}

// terminate ends every other backend of dsn's database, as an operator's
// pg_terminate_backend would: the pools' connections and the listener's.
func terminate(t testing.TB, dsn string) int {
	t.Helper()
	pool := newPool(t, dsn)
	var n int
	err := pool.QueryRow(bg, `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid()`).Scan(&n)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// When B's listening connection is cut (notifications sent while it is
// away are lost), B checks its waits as soon as it listens again. B's clock
// never moves, so no timer helps it.
func TestCrossInstanceListenerCut(t *testing.T) {
	t.Parallel()
	dsn, table := shared.NewDatabase(t), newTable()
	storesuite.Wake(t, instance(t, dsn, table), instance(t, dsn, table), func() {
		if n := terminate(t, dsn); n == 0 {
			t.Fatal("no backend to terminate")
		}
	})
}

// subscribe subscribes to s and returns the wake-ups, "" included.
func subscribe(t testing.TB, s *pgstore.Store) (string, <-chan string) {
	t.Helper()
	woken := make(chan string, 64)
	id, stop, err := s.Subscribe(bg, func(key string) {
		select {
		case woken <- key:
		default:
			t.Error("wake-up dropped: the test reads too slowly")
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return id, woken
}

// wantWake waits for the wake-up of key.
func wantWake(t testing.TB, woken <-chan string, key string) {
	t.Helper()
	if got := idemtest.Recv(t, woken); got != key {
		t.Fatalf("wake-up %q, want %q", got, key)
	}
}

// waitOn claims key for a holder and registers waiter on it; it returns
// the holder's token.
func waitOn(t testing.TB, s *pgstore.Store, key, waiter string) store.Token {
	t.Helper()
	req := store.ClaimRequest{Owner: "holder-" + key, Lease: time.Hour, TTL: time.Hour}
	res, err := s.Claim(bg, key, req)
	if err != nil || res.Status != store.Claimed {
		t.Fatalf("claim: %v %v", res.Status, err)
	}
	req.Owner, req.Waiter = "waiter-"+key, waiter
	if w, err := s.Claim(bg, key, req); err != nil || w.Status != store.InProgress {
		t.Fatalf("waiter's claim: %v %v", w.Status, err)
	}
	return res.Token
}

// The listener reconnects after its connection is terminated, reports ""
// (wake-ups may have been lost), and wakes waiters again.
func TestListenerReconnectsAfterTerminate(t *testing.T) {
	t.Parallel()
	dsn := shared.NewDatabase(t)
	s := newStore(t, newPool(t, dsn), pgstore.Options{})
	id, woken := subscribe(t, s)
	terminate(t, dsn)
	wantWake(t, woken, "")
	tok := waitOn(t, s, "after", id)
	if _, err := s.Complete(bg, "after", tok, store.Record{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	wantWake(t, woken, "after")
}

// The listener reconnects after the server restarts, however long it
// takes, reports "", and wakes waiters again.
func TestListenerReconnectsAfterRestart(t *testing.T) {
	t.Parallel()
	srv := startServer(t, true)
	s := newStore(t, newPool(t, srv.DSN("postgres")), pgstore.Options{})
	id, woken := subscribe(t, s)
	srv.Kill()
	time.Sleep(1500 * time.Millisecond) // a few failed attempts to connect
	if err := srv.Restart(); err != nil {
		t.Fatal(err)
	}
	wantWake(t, woken, "")
	// The pool's first calls may meet connections the restart cut.
	eventually(t, "the pool working", func() bool {
		_, err := s.Get(bg, "any")
		return errors.Is(err, store.ErrNotFound)
	})
	tok := waitOn(t, s, "after", id)
	if _, err := s.Complete(bg, "after", tok, store.Record{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	wantWake(t, woken, "after")
}

// NOTIFY goes only to the channels of waiters, carries the key's digest,
// never the key, and nothing at all when nobody waits.
func TestNotifyOnlyWaiters(t *testing.T) {
	t.Parallel()
	pool := sharedPool(t)
	s := newStore(t, pool, pgstore.Options{})
	id, woken := subscribe(t, s)
	spy := listenTo(t, pool, id)
	quiet := store.ClaimRequest{Owner: "o", Lease: time.Hour, TTL: time.Hour}
	res, err := s.Claim(bg, "nobody-waits", quiet)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(bg, "nobody-waits", res.Token, store.Record{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	key := "secret:card-4242-4242-4242-4242"
	tok := waitOn(t, s, key, id)
	if _, err := s.Complete(bg, key, tok, store.Record{}, time.Hour); err != nil {
		t.Fatal(err)
	}
	wantWake(t, woken, key)
	payload := idemtest.Recv(t, spy)
	if len(payload) != 32 || payload == key {
		t.Fatalf("payload %q: want a 32-character digest", payload)
	}
	select {
	case p := <-spy:
		t.Fatalf("a second notification %q: the key nobody waited on was notified", p)
	case <-time.After(100 * time.Millisecond):
	}
}

// listenTo LISTENs to channel on a connection of its own, and returns the
// payloads that arrive.
func listenTo(t testing.TB, pool *pgxpool.Pool, channel string) <-chan string {
	t.Helper()
	pc, err := pool.Acquire(bg)
	if err != nil {
		t.Fatal(err)
	}
	conn := pc.Hijack()
	if _, err := conn.Exec(bg, `LISTEN "`+channel+`"`); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(bg)
	out := make(chan string, 16)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			n, err := conn.WaitForNotification(ctx)
			if err != nil {
				return
			}
			out <- n.Payload
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		conn.Close(bg)
	})
	return out
}

// Subscriptions come and go at once on one store, sharing its listening
// connection: each live one gets its wake-ups, a stopped one none, and the
// last to stop closes the connection (goleak checks the goroutine).
func TestSubscriptionsComeAndGo(t *testing.T) {
	t.Parallel()
	s := newStore(t, sharedPool(t), pgstore.Options{})
	type sub struct {
		id    string
		stop  func()
		woken chan string
	}
	subs := make([]*sub, 8)
	var wg sync.WaitGroup
	for i := range subs {
		wg.Go(func() {
			sb := &sub{woken: make(chan string, 8)}
			id, stop, err := s.Subscribe(bg, func(key string) {
				if key != "" {
					sb.woken <- key
				}
			})
			if err != nil {
				t.Error(err)
				return
			}
			sb.id, sb.stop = id, stop
			subs[i] = sb
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	for _, sb := range subs[:3] {
		sb.stop()
	}
	for i, sb := range subs {
		key := fmt.Sprint("k", i)
		tok := waitOn(t, s, key, sb.id)
		if _, err := s.Complete(bg, key, tok, store.Record{}, time.Hour); err != nil {
			t.Fatal(err)
		}
		if i >= 3 {
			wantWake(t, sb.woken, key)
		}
	}
	time.Sleep(100 * time.Millisecond)
	for i, sb := range subs[:3] {
		select {
		case k := <-sb.woken:
			t.Errorf("stopped subscription %d woken for %q", i, k)
		default:
		}
	}
	for _, sb := range subs[3:] {
		sb.stop()
	}
}
