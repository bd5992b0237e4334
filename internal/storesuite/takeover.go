package storesuite

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/flows"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
)

// Early takeover across processes, with default settings: a worker
// process holds keys (through Do, httpidem, flows and consume, each
// renewing a lease of 60s) and is SIGKILLed; a runtime in the test process calls
// the same keys, and each runs within takeoverBound of the kill. And a
// store outage of 20s while a live owner runs hands its key to nobody.

const envHold = "IDEM_TEST_HOLD"

// takeoverBound is the target: a SIGKILLed instance's keys are
// free within 10s.
const takeoverBound = 10 * time.Second

// holdKeys is how many keys the victim holds through each front end.
const holdKeys = 8

// holdMain is a worker that holds keys until it is killed: their
// functions never return. It prints "held" once every one runs.
func holdMain(w Worker) int {
	rt, err := idem.New(idem.Options{Store: w.Store})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	mw, err := httpidem.New(httpidem.Options{Runtime: rt, SharedScope: true})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	c, err := consume.New(consume.Options{Runtime: rt})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	var running sync.WaitGroup
	running.Add(4 * holdKeys)
	hang := func(context.Context) (string, error) {
		running.Done()
		select {}
	}
	flow := holdFlow(func(ctx context.Context, s string) (string, error) { return hang(ctx) })
	for i := range holdKeys {
		go idem.Do(context.Background(), rt, fmt.Sprint("do", i), func(ctx context.Context) (string, error) {
			running.Done()
			select {}
		})
		h := mw.Handler(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
			running.Done()
			select {}
		}))
		go h.ServeHTTP(httptest.NewRecorder(), holdRequest(i))
		go flow.Run(context.Background(), rt, "in", flows.RunOptions[string]{IdempotencyKey: fmt.Sprint("flow", i)})
		go consume.Handle(context.Background(), c, holdDelivery(i), hang)
	}
	running.Wait()
	fmt.Println("held")
	select {}
}

// holdFlow is the flow the victim runs with a step that hangs, and the
// test with one that returns.
func holdFlow(step func(context.Context, string) (string, error)) *flows.Flow[string] {
	return flows.Must(flows.New("hold", flows.Step("s", step)))
}

func holdDelivery(i int) consume.Delivery {
	return consume.Delivery{Scope: "HOLD/test", Key: fmt.Sprint("msg", i), Attempt: 1}
}

func holdRequest(i int) *http.Request {
	r := httptest.NewRequest("POST", "/hold", nil)
	r.Header.Set("Idempotency-Key", strconv.Quote(fmt.Sprint("http", i)))
	return r
}

// KilledOwnerTakenOver starts a worker that holds keys, SIGKILLs it, and
// calls its keys on rt (default settings) through Do, httpidem, flows and
// consume: each must run
// within 10s of the kill. It returns the longest time a key took.
func KilledOwnerTakenOver(t *testing.T, p Processes, rt *idem.Runtime) time.Duration {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envWorker+"=hold", envHold+"=1")
	cmd.Env = append(cmd.Env, p.Env...)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	held := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == "held" {
				held <- true
				return
			}
		}
		held <- false
	}()
	if !idemtest.Recv(t, held) {
		t.Fatal("the worker ended before it held its keys")
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()

	mw, err := httpidem.New(httpidem.Options{Runtime: rt, SharedScope: true})
	if err != nil {
		t.Fatal(err)
	}
	defer mw.Close(bg)
	var runs atomic.Int32
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		runs.Add(1)
		w.WriteHeader(http.StatusCreated)
	}))
	c, err := consume.New(consume.Options{Runtime: rt})
	if err != nil {
		t.Fatal(err)
	}
	flow := holdFlow(func(context.Context, string) (string, error) { runs.Add(1); return "new", nil })
	var mu sync.Mutex
	var longest time.Duration
	note := func(key string, ok bool) {
		took := time.Since(killed)
		mu.Lock()
		defer mu.Unlock()
		longest = max(longest, took)
		if !ok || took > takeoverBound {
			t.Errorf("key %s: taken over %v after the kill (ok %v), want within %v", key, took, ok, takeoverBound)
		}
	}
	var wg sync.WaitGroup
	for i := range holdKeys {
		wg.Go(func() {
			key := fmt.Sprint("do", i)
			v, err := idem.Do(bg, rt, key, func(context.Context) (string, error) { runs.Add(1); return "new", nil },
				idem.WithSettle(2*takeoverBound))
			note(key, err == nil && v == "new")
		})
		wg.Go(func() {
			// A client retries a 409 (the default settle is 10s).
			for time.Since(killed) < 2*takeoverBound {
				w := httptest.NewRecorder()
				h.ServeHTTP(w, holdRequest(i))
				if w.Code == http.StatusCreated {
					note(fmt.Sprint("http", i), true)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			note(fmt.Sprint("http", i), false)
		})
		wg.Go(func() {
			// A flow run that fails (its settle ended) is run again.
			for time.Since(killed) < 2*takeoverBound {
				if _, err := flow.Run(bg, rt, "in", flows.RunOptions[string]{IdempotencyKey: fmt.Sprint("flow", i)}); err == nil {
					note(fmt.Sprint("flow", i), true)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			note(fmt.Sprint("flow", i), false)
		})
		wg.Go(func() {
			// The broker redelivers a message left for later.
			for time.Since(killed) < 2*takeoverBound {
				_, v := consume.Handle(bg, c, holdDelivery(i), func(context.Context) (string, error) { runs.Add(1); return "new", nil })
				if v.Decision == consume.Ack {
					note(fmt.Sprint("msg", i), true)
					return
				}
				time.Sleep(100 * time.Millisecond)
			}
			note(fmt.Sprint("msg", i), false)
		})
	}
	wg.Wait()
	if n := runs.Load(); n != 4*holdKeys {
		t.Fatalf("%d runs after the kill, want %d", n, 4*holdKeys)
	}
	t.Logf("every key of the killed worker ran again within %v of the kill", longest.Round(time.Millisecond))
	return longest
}

// OutageKeepsLiveOwner checks that an outage of the store for 20s, with
// default settings, hands no live owner's key over: a runtime a owns a
// key while the server is away; right after it is back, b calls the key
// and waits (its grace: a's record ended in the outage, and a has not
// beaten yet); a's function returns well after b's grace, and b gets a's
// result. fn runs once.
func OutageKeepsLiveOwner(t *testing.T, a, b *idem.Runtime, o Outage) {
	var runs atomic.Int32
	started := make(chan struct{}, 1)
	ret := make(chan string, 1)
	t.Cleanup(func() {
		select {
		case ret <- "test over":
		default:
		}
	})
	fn := func(ctx context.Context) (string, error) {
		runs.Add(1)
		started <- struct{}{}
		return <-ret, nil
	}
	owner := idemtest.GoDo(bg, a, "live", fn)
	idemtest.Recv(t, started)
	o.Down()
	time.Sleep(20 * time.Second)
	o.Up()
	waiter := idemtest.GoDo(bg, b, "live", fn, idem.WithSettle(time.Minute))
	// Past every bound of early takeover (TTL 3s, grace 5s, a beat a second).
	time.Sleep(10 * time.Second)
	ret <- "A"
	if r := idemtest.Recv(t, owner); r.Err != nil || r.V != "A" {
		t.Fatalf("the owner after the outage: %+v, want A stored", r)
	}
	if r := idemtest.Recv(t, waiter); r.Err != nil || r.V != "A" {
		t.Fatalf("the waiter: %+v, want A", r)
	}
	if n := runs.Load(); n != 1 {
		t.Fatalf("fn ran %d times, want once", n)
	}
}
