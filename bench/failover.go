package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store/redisstore"
)

// The failover run (-failover): the harness starts a Redis Cluster of its
// own (3 masters, one replica each, from redis-server and redis-cli on
// PATH, on free loopback ports), runs new keys through idem on it with
// go-redis's default ClusterOptions, SIGKILLs one master and measures what
// the issue on failover asks of the store: how long the promotion took, how
// soon after it the failed master's slots ran new keys again, and the other
// masters' throughput from the fault to the promotion as a ratio to their
// throughput in the 5 s before the fault (a batch that waited for the dead
// master would drag them down). It also counts keys run twice and wrong
// results; with -wait n the store confirms writes with WAIT n.

// failoverBefore is the window before the fault the ratio is taken
// against, and failoverAfter how long the load runs on after the
// promotion.
const (
	failoverBefore = 5 * time.Second
	failoverAfter  = 8 * time.Second
)

// failoverReport is what a failover run measured.
type failoverReport struct {
	Victim, Promoted       string
	Promotion              time.Duration // fault to promotion
	ServedAgain            time.Duration // promotion to the first new key completed on the failed slots; -1 if none
	BeforeRate, DuringRate float64       // calls/s on the other masters' keys
	Ratio                  float64       // DuringRate / BeforeRate
	Calls, Errors          int64
	FailedSlotErrors       int64 // errors on the failed master's keys
	RanTwice, Wrong        int64
	FirstHealthyError      string // the first error on the other masters' keys, and when
	SlotReloads            int64
}

// harnessTB lets the harness use internal/redistest outside a test: a
// fatal error ends the run through a panic that runFailover recovers, and
// cleanups run when it returns.
type harnessTB struct {
	mu       sync.Mutex
	cleanups []func()
	dirs     []string
}

type harnessFatal struct{ msg string }

func (*harnessTB) Helper()                   {}
func (*harnessTB) Fatal(args ...any)         { panic(harnessFatal{fmt.Sprint(args...)}) }
func (*harnessTB) Fatalf(f string, a ...any) { panic(harnessFatal{fmt.Sprintf(f, a...)}) }
func (*harnessTB) Errorf(f string, a ...any) { fmt.Fprintf(os.Stderr, "bench: "+f+"\n", a...) }

func (h *harnessTB) Cleanup(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.cleanups = append(h.cleanups, f)
}

func (h *harnessTB) TempDir() string {
	d, err := os.MkdirTemp("", "idem-bench-failover-")
	if err != nil {
		panic(harnessFatal{err.Error()})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.dirs = append(h.dirs, d)
	return d
}

func (h *harnessTB) done() {
	h.mu.Lock()
	cs, ds := h.cleanups, h.dirs
	h.cleanups, h.dirs = nil, nil
	h.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		cs[i]()
	}
	for _, d := range ds {
		_ = os.RemoveAll(d)
	}
}

// runFailover runs the failover measurement and writes its report to w.
func runFailover(c *Config, w io.Writer) (rep *failoverReport, err error) {
	tb := &harnessTB{}
	defer tb.done()
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(harnessFatal)
			if !ok {
				panic(r)
			}
			err = errors.New(f.msg)
		}
	}()
	fmt.Fprintln(w, "failover: starting a Redis Cluster of 3 masters with a replica each")
	// go-redis logs each failed dial to the dead master; the report
	// counts the errors instead.
	redis.SetLogger(quietLogger{})
	cl := redistest.StartReplicatedCluster(tb, 3, redistest.ReplicatedOptions{})
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer client.Close()
	ctx := context.Background()
	st, err := redisstore.New(ctx, client, redisstore.Options{KeyPrefix: "bench-failover:", WaitReplicas: c.Wait})
	if err != nil {
		return nil, err
	}
	rt, err := idem.New(idem.Options{Store: st})
	if err != nil {
		return nil, err
	}
	defer rt.Close(context.Background())

	victim := cl.Masters(tb)[0]
	nodes, err := redistest.Topology(victim.Addr)
	if err != nil {
		return nil, err
	}
	var slots [][2]int
	for _, n := range nodes {
		if n.Addr == victim.Addr {
			slots = n.Slots
		}
	}
	onVictim := func(key string) bool {
		s := redistest.Slot(st.RecordKey(key))
		for _, r := range slots {
			if s >= r[0] && s <= r[1] {
				return true
			}
		}
		return false
	}

	rep = &failoverReport{Victim: victim.Addr, ServedAgain: -1}
	var (
		stop    atomic.Bool
		wg      sync.WaitGroup
		mu      sync.Mutex
		healthy []int64 // unix nanos of calls completed on the other masters' keys
		victims []int64 // on the failed master's keys
		runs    sync.Map
	)
	for g := range c.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// A caller keeps to the keys of one side: a caller that met
			// a key of the dead master would wait out its timeout there,
			// and the other masters' load would drop with it although
			// the store serves them.
			side := g%3 == 0
			var mine, theirs []int64
			for i := 0; !stop.Load(); i++ {
				key := fmt.Sprintf("fo-%d-%d", g, i)
				if onVictim(key) != side {
					continue
				}
				cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
				v, err := idem.Do(cctx, rt, key, func(context.Context) (string, error) {
					n, _ := runs.LoadOrStore(key, new(atomic.Int64))
					if n.(*atomic.Int64).Add(1) == 2 {
						atomic.AddInt64(&rep.RanTwice, 1)
					}
					return key, nil
				})
				cancel()
				atomic.AddInt64(&rep.Calls, 1)
				v1 := side
				switch {
				case err != nil:
					atomic.AddInt64(&rep.Errors, 1)
					if v1 {
						atomic.AddInt64(&rep.FailedSlotErrors, 1)
					} else {
						mu.Lock()
						if rep.FirstHealthyError == "" {
							rep.FirstHealthyError = fmt.Sprintf("%v (at %s)", err, time.Now().Format("15:04:05.000"))
						}
						mu.Unlock()
					}
					time.Sleep(10 * time.Millisecond) // no hot loop while a master is down
				case v != key:
					atomic.AddInt64(&rep.Wrong, 1)
				case v1:
					theirs = append(theirs, time.Now().UnixNano())
				default:
					mine = append(mine, time.Now().UnixNano())
				}
			}
			mu.Lock()
			healthy, victims = append(healthy, mine...), append(victims, theirs...)
			mu.Unlock()
		}()
	}
	stopLoad := func() { stop.Store(true); wg.Wait() }
	defer stopLoad()

	time.Sleep(failoverBefore + time.Second) // the first second warms up
	fmt.Fprintf(w, "failover: SIGKILL of master %s (slots %s) under load\n", victim.Addr, showSlots(slots))
	fault := time.Now()
	fmt.Fprintf(w, "failover: fault at %s\n", fault.Format("15:04:05.000"))
	victim.Kill()
	promotedSrv, took := cl.WaitPromoted(tb, victim, 30*time.Second)
	promoted := time.Now()
	rep.Promoted, rep.Promotion = promotedSrv.Addr, took
	if c.Wait > 0 {
		// With WAIT, the promoted master's writes are unconfirmed until
		// a replica joins it: the killed node rejoins as its replica.
		victim.Restart()
	}
	time.Sleep(failoverAfter)
	stopLoad()

	before, during := 0, 0
	for _, at := range healthy {
		t := time.Unix(0, at)
		switch {
		case t.After(fault.Add(-failoverBefore)) && t.Before(fault):
			before++
		case t.After(fault) && t.Before(promoted):
			during++
		}
	}
	rep.BeforeRate = float64(before) / failoverBefore.Seconds()
	if span := promoted.Sub(fault); span > 0 {
		rep.DuringRate = float64(during) / span.Seconds()
	}
	if rep.BeforeRate > 0 {
		rep.Ratio = rep.DuringRate / rep.BeforeRate
	}
	sort.Slice(victims, func(i, j int) bool { return victims[i] < victims[j] })
	for _, at := range victims {
		if t := time.Unix(0, at); t.After(promoted) {
			rep.ServedAgain = t.Sub(promoted)
			break
		}
	}
	rep.SlotReloads = int64(st.Stats().SlotReloads)
	writeFailover(w, rep, c.Wait)
	return rep, nil
}

// writeFailover prints rep.
func writeFailover(w io.Writer, r *failoverReport, wait int) {
	served := "never (within the run)"
	if r.ServedAgain >= 0 {
		served = r.ServedAgain.Round(time.Millisecond).String() + " after the promotion (the first new key completed there)"
	}
	mode := "no WAIT"
	if wait > 0 {
		mode = fmt.Sprintf("WaitReplicas %d; the killed node was restarted at the promotion to rejoin as a replica", wait)
	}
	fmt.Fprintf(w, "\nRedis Cluster failover (3 masters + 3 replicas, go-redis default ClusterOptions, %s)\n", mode)
	fmt.Fprintf(w, "  promotion            %v after the SIGKILL (%s now serves the slots of %s)\n", r.Promotion.Round(time.Millisecond), r.Promoted, r.Victim)
	fmt.Fprintf(w, "  failed slots         ran new keys again %s\n", served)
	fmt.Fprintf(w, "  other masters        %.2f× their rate of the %v before the fault, from fault to promotion (%.0f/s vs %.0f/s)\n",
		r.Ratio, failoverBefore, r.DuringRate, r.BeforeRate)
	fmt.Fprintf(w, "  calls                %d, errors %d (%d on the failed master's keys), slot map reloads %d\n", r.Calls, r.Errors, r.FailedSlotErrors, r.SlotReloads)
	fmt.Fprintf(w, "  keys run twice       %d, wrong results %d\n", r.RanTwice, r.Wrong)
	if r.FirstHealthyError != "" {
		fmt.Fprintf(w, "  first error on the other masters' keys: %s\n", r.FirstHealthyError)
	}
}

// quietLogger drops go-redis's log lines.
type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

// showSlots formats slot ranges as 0-5460,...
func showSlots(rs [][2]int) string {
	parts := make([]string, len(rs))
	for i, r := range rs {
		parts[i] = fmt.Sprintf("%d-%d", r[0], r[1])
	}
	return strings.Join(parts, ",")
}
