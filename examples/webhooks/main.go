// Command webhooks is a payment-webhook receiver behind the Idempotency-Key
// middleware (package httpidem), and a sender that delivers the way webhook
// senders do: at least once, with duplicates sent concurrently and retries
// after errors and timeouts. Each payment is credited once.
//
//	go run ./examples/webhooks
//
// Everything runs in this process, on a loopback listener; no external
// service is needed. The program exits 1 if any payment was credited other
// than once.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/httpidem"
)

// Event is a payment provider's webhook.
type Event struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Account string `json:"account"`
	Cents   int    `json:"cents"`
}

// ledger is the receiver's side effect: crediting accounts.
type ledger struct {
	mu       sync.Mutex
	balance  map[string]int
	credited map[string]int // credits per event id
	flaky    map[string]bool
}

func newLedger() *ledger {
	return &ledger{balance: map[string]int{}, credited: map[string]int{}, flaky: map[string]bool{"evt_2": true}}
}

// ServeHTTP handles POST /webhooks/payments.
func (l *ledger) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var ev Event
	if err := json.NewDecoder(r.Body).Decode(&ev); err != nil || ev.ID == "" || ev.Cents <= 0 {
		http.Error(w, "bad event", http.StatusBadRequest)
		return
	}
	time.Sleep(40 * time.Millisecond) // the database write
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.flaky[ev.ID] { // the first attempt at evt_2 hits a busy database
		delete(l.flaky, ev.ID)
		http.Error(w, "database busy", http.StatusServiceUnavailable)
		return
	}
	l.balance[ev.Account] += ev.Cents
	l.credited[ev.ID]++
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_ = json.NewEncoder(w).Encode(map[string]any{"credited": ev.Cents, "balance": l.balance[ev.Account]})
}

// creditedOnce prints how many times each event was credited and the
// balances, and reports whether every payment was credited exactly once.
func (l *ledger) creditedOnce(events []Event) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	ok := true
	for _, ev := range events {
		n := l.credited[ev.ID]
		fmt.Printf("%s credited %d time(s)\n", ev.ID, n)
		ok = ok && n == 1
	}
	fmt.Printf("balances: acct_42 %d, acct_7 %d\n", l.balance["acct_42"], l.balance["acct_7"])
	return ok && l.balance["acct_42"] == 5700 && l.balance["acct_7"] == 990
}

func main() {
	log.SetFlags(0)
	ctx := context.Background()

	rcv := startReceiver()
	fmt.Println("receiver listening on", rcv.url)

	// The sender: each event fanned out 4 times at once, every copy retried
	// until it gets a 2xx (or a 4xx, which a sender does not retry).
	events := []Event{
		{ID: "evt_1", Type: "payment.succeeded", Account: "acct_42", Cents: 4200},
		{ID: "evt_2", Type: "payment.succeeded", Account: "acct_42", Cents: 1500},
		{ID: "evt_3", Type: "payment.succeeded", Account: "acct_7", Cents: 990},
	}
	s := newSender(rcv.url)
	defer s.client.CloseIdleConnections()
	start := time.Now()
	s.fanOut(ctx, events, 4)
	// A late redelivery, answered from the stored response, and a forged
	// delivery that reuses an event id with another amount (422).
	s.deliver(ctx, events[0])
	forged := events[0]
	forged.Cents = 999999
	s.deliver(ctx, forged)
	fmt.Printf("sent %d events as %d deliveries in %v; the sender saw:\n", len(events), s.attempts.Load(), time.Since(start).Round(time.Millisecond))
	s.seen.print()

	rcv.stop(ctx)
	if !rcv.ledger.creditedOnce(events) {
		fmt.Println("FAIL: a payment was not credited exactly once")
		os.Exit(1)
	}
	fmt.Println("every payment credited exactly once")
}

// receiver is the service: the ledger behind the Idempotency-Key
// middleware, served on a loopback listener.
type receiver struct {
	url    string
	ledger *ledger
	mw     *httpidem.Middleware
	srv    *http.Server
}

// startReceiver serves the ledger behind the middleware, which lets a
// duplicate wait for the delivery in flight.
func startReceiver() *receiver {
	mw, err := httpidem.New(httpidem.Options{
		Policy: idem.Policy{Settle: 5 * time.Second}, // a duplicate waits for the delivery in flight
		// Webhook deliveries carry no credentials: every sender's key is in
		// one scope. Keys here are event ids the sender makes unguessable,
		// and the responses hold nothing private.
		SharedScope: true,
		Logger:      slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})),
	})
	if err != nil {
		log.Fatal(err)
	}
	l := newLedger()
	mux := http.NewServeMux()
	mux.Handle("POST /webhooks/payments", mw.Handler(l))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
			log.Fatal(err)
		}
	}()
	return &receiver{url: "http://" + ln.Addr().String() + "/webhooks/payments", ledger: l, mw: mw, srv: srv}
}

// stop shuts the server down, then closes the middleware, which waits for
// the handlers still running to store their responses.
func (r *receiver) stop(ctx context.Context) {
	shutdown, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := r.srv.Shutdown(shutdown); err != nil {
		log.Fatal(err)
	}
	if err := r.mw.Close(shutdown); err != nil {
		log.Fatal(err)
	}
}

// sender delivers webhooks the way senders do: at least once, retrying
// after errors and timeouts, with the event id as the Idempotency-Key.
type sender struct {
	url      string
	client   *http.Client
	seen     *tally
	attempts atomic.Int32
}

func newSender(url string) *sender {
	return &sender{url: url, client: &http.Client{Timeout: 10 * time.Second}, seen: &tally{n: map[string]int{}}}
}

// fanOut sends every event copies times at once, as a sender that lost
// track of its deliveries would, and returns when every copy is delivered.
func (s *sender) fanOut(ctx context.Context, events []Event, copies int) {
	var wg sync.WaitGroup
	for _, ev := range events {
		for range copies {
			wg.Go(func() { s.deliver(ctx, ev) })
		}
	}
	wg.Wait()
}

// deliver sends ev until the receiver takes it, at most 10 times.
func (s *sender) deliver(ctx context.Context, ev Event) {
	body, _ := json.Marshal(ev)
	for range 10 {
		if s.attempt(ctx, ev.ID, body) {
			return
		}
		time.Sleep(20 * time.Millisecond) // back off, then retry
	}
	log.Fatalf("%s: not delivered after 10 attempts", ev.ID)
}

// attempt sends one delivery and reports whether the sender is done with
// it: a 2xx, or a 4xx other than 409 (which a sender does not retry).
func (s *sender) attempt(ctx context.Context, id string, body []byte) bool {
	s.attempts.Add(1)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", `"`+id+`"`) // the event id, as a quoted string
	resp, err := s.client.Do(req)
	if err != nil {
		s.seen.add("network error")
		return false
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	what := fmt.Sprint(resp.StatusCode)
	if resp.Header.Get("Idempotent-Replayed") == "true" {
		what += " (replayed)"
	}
	s.seen.add(what)
	return resp.StatusCode < 500 && resp.StatusCode != http.StatusConflict
}

// tally counts what the sender saw.
type tally struct {
	mu sync.Mutex
	n  map[string]int
}

func (t *tally) add(what string) {
	t.mu.Lock()
	t.n[what]++
	t.mu.Unlock()
}

// print lists the counts, one line each, in order.
func (t *tally) print() {
	t.mu.Lock()
	defer t.mu.Unlock()
	var kinds []string
	for k := range t.n {
		kinds = append(kinds, k)
	}
	sort.Strings(kinds)
	for _, k := range kinds {
		fmt.Printf("  %-16s %d\n", k, t.n[k])
	}
}
