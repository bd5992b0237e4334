package redisstore_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store/redisstore"
)

// A failover worker runs idem.Do on a cluster client with go-redis's
// default ClusterOptions until its stdin closes, and writes a ledger line
// for every run of fn and every call's end, with the node that, by the
// client's slot map, served the key at that moment (the map may be stale,
// so the test goes by the key's slot):
//
//	R <key> <value> <node> <slot> <unix ms>   fn started: its claim was acknowledged
//	D <key> <value> <node> <slot> <unix ms>   a call returned value (for the
//	                                          owner: its completion was acknowledged)
//	E <key> <class> <node> <slot> <unix ms>   a call failed
//	S reloads <n> unconfirmed <n>      the store's Stats, at the end
//
// Keys follow the clock: a call picks one of the keys of the last second
// (one key per 10 ms), so each key is called many times, by every worker,
// over about a second.

const (
	envFailoverWorker = "IDEM_FAILOVER_WORKER"
	envFailoverAddrs  = "IDEM_FAILOVER_ADDRS"
	envFailoverWait   = "IDEM_FAILOVER_WAIT"
	envFailoverLedger = "IDEM_FAILOVER_LEDGER"
	envFailoverPrefix = "IDEM_FAILOVER_PREFIX"

	// failoverLease outlasts a failover (about 4-5 s with the test's node
	// timeout), so that no lease ends while its holder cannot renew it: a
	// key run twice is one whose write the failover lost.
	failoverLease = 6 * time.Second
)

func failoverWorker(id string) int {
	ctx := context.Background()
	redis.SetLogger(quiet{}) // a refused dial per call while a master is down
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(os.Getenv(envFailoverAddrs), ",")})
	defer cc.Close()
	wait, _ := strconv.Atoi(os.Getenv(envFailoverWait))
	s, err := redisstore.New(ctx, cc, redisstore.Options{KeyPrefix: os.Getenv(envFailoverPrefix), WaitReplicas: wait})
	if err != nil {
		fmt.Fprintln(os.Stderr, "failover worker:", err)
		return 2
	}
	defer s.Close()
	rt, err := idem.New(idem.Options{Store: s, Policy: idem.Policy{Lease: failoverLease, Settle: 8 * time.Second}})
	if err != nil {
		fmt.Fprintln(os.Stderr, "failover worker:", err)
		return 2
	}
	f, err := os.Create(os.Getenv(envFailoverLedger))
	if err != nil {
		fmt.Fprintln(os.Stderr, "failover worker:", err)
		return 2
	}
	w := bufio.NewWriter(f)
	var mu sync.Mutex
	node := func(key string) string {
		n, err := cc.MasterForKey(ctx, s.RecordKey(key))
		if err != nil {
			return "?"
		}
		return n.Options().Addr
	}
	note := func(kind, key, v string) {
		line := fmt.Sprintf("%s %s %s %s %d %d\n", kind, key, v, node(key), redistest.Slot(s.RecordKey(key)), time.Now().UnixMilli())
		mu.Lock()
		w.WriteString(line)
		mu.Unlock()
	}
	var stop atomic.Bool
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		stop.Store(true)
	}()
	// Calls start at a steady rate, each in its own goroutine (at most
	// 1000 at once), so that calls stuck on a failed master do not hold
	// back the calls on the others.
	var seq atomic.Uint64
	var wg sync.WaitGroup
	seed, _ := strconv.Atoi(id)
	r := rand.New(rand.NewPCG(uint64(seed), 1))
	slots := make(chan struct{}, 1000)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	for range tick.C {
		if stop.Load() {
			break
		}
		key := fmt.Sprint("f", time.Now().UnixMilli()/10-r.Int64N(100))
		select {
		case slots <- struct{}{}:
		default:
			continue
		}
		wg.Go(func() {
			defer func() { <-slots }()
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			v, err := idem.Do(cctx, rt, key, func(context.Context) (string, error) {
				v := fmt.Sprintf("%s.%d", id, seq.Add(1))
				note("R", key, v)
				time.Sleep(5 * time.Millisecond)
				return v, nil
			})
			if err != nil {
				note("E", key, errClass(err))
				return
			}
			note("D", key, v)
		})
	}
	wg.Wait()
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = rt.Close(closeCtx)
	mu.Lock()
	defer mu.Unlock()
	st := s.Stats()
	fmt.Fprintf(w, "S reloads %d unconfirmed %d\n", st.SlotReloads, st.Unconfirmed)
	if err := w.Flush(); err != nil {
		fmt.Fprintln(os.Stderr, "failover worker:", err)
		return 2
	}
	if err := f.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "failover worker:", err)
		return 2
	}
	return 0
}

func errClass(err error) string {
	switch {
	case errors.Is(err, redisstore.ErrUnconfirmed):
		return "unconfirmed"
	case errors.Is(err, idem.ErrStoreUnavailable):
		return "store"
	case errors.Is(err, idem.ErrLeaseLost):
		return "leaselost"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, idem.ErrConflict):
		return "conflict"
	}
	return "other"
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}
