package redisstore_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store/redisstore"
)

// The multi-process tests re-execute this test binary as worker processes
// (TestMain sends them to workerMain). Each worker runs its own runtime on
// its own Redis client and calls every key of a shared set, each twice, in
// its own order, from several goroutines. Each execution records itself in
// Redis (RPUSH exec:<key> <worker>), so the executions are counted outside
// the workers, even for a worker that is killed.

const (
	envWorker = "IDEM_TEST_WORKER"
	envAddr   = "IDEM_TEST_REDIS"
	envPrefix = "IDEM_TEST_PREFIX"
	envKeys   = "IDEM_TEST_KEYS"
)

const (
	workerLease  = time.Second
	workerSettle = 8 * time.Second
	workerWork   = 30 * time.Millisecond
)

// workerReport is what a worker prints when it is done.
type workerReport struct {
	Worker  string
	Calls   int
	Errors  map[string]int
	MaxWait time.Duration
	Wrong   []string // keys that returned another key's value
}

func TestMain(m *testing.M) {
	if id := os.Getenv(envWorker); id != "" {
		os.Exit(workerMain(id))
	}
	goleak.VerifyTestMain(m)
}

func workerMain(id string) int {
	ctx := context.Background()
	nkeys, _ := strconv.Atoi(os.Getenv(envKeys))
	client := redis.NewClient(&redis.Options{Addr: os.Getenv(envAddr)})
	defer client.Close()
	s, err := redisstore.New(ctx, client, redisstore.Options{KeyPrefix: os.Getenv(envPrefix)})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	defer s.Close()
	rt, err := idem.New(idem.Options{Store: s, Lease: workerLease, Settle: workerSettle})
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	rep := workerReport{Worker: id, Errors: map[string]int{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	seed, _ := strconv.Atoi(id)
	for g := range 8 {
		order := rand.New(rand.NewPCG(uint64(seed), uint64(g))).Perm(2 * nkeys)
		wg.Go(func() {
			for _, i := range order {
				key := fmt.Sprint("k", i%nkeys)
				start := time.Now()
				v, err := idem.Do(ctx, rt, key, func(ctx context.Context) (string, error) {
					if err := client.RPush(ctx, os.Getenv(envPrefix)+"exec:"+key, id).Err(); err != nil {
						return "", err
					}
					time.Sleep(workerWork)
					return "value-of-" + key, nil
				})
				wait := time.Since(start)
				mu.Lock()
				rep.Calls++
				rep.MaxWait = max(rep.MaxWait, wait)
				switch {
				case err != nil:
					rep.Errors[errorClass(err)]++
				case v != "value-of-"+key:
					rep.Wrong = append(rep.Wrong, key)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	closeCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_ = rt.Close(closeCtx)
	out, _ := json.Marshal(rep)
	fmt.Println(string(out))
	return 0
}

func errorClass(err error) string {
	switch {
	case errors.Is(err, idem.ErrConflict):
		return "conflict"
	case errors.Is(err, idem.ErrStoreUnavailable):
		return "store"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	}
	return err.Error()
}

type worker struct {
	id  string
	cmd *exec.Cmd
	out bytes.Buffer
}

func startWorkers(t *testing.T, addr, prefix string, n, keys int) []*worker {
	var ws []*worker
	for i := range n {
		w := &worker{id: strconv.Itoa(i)}
		w.cmd = exec.Command(os.Args[0], "-test.run=^$")
		w.cmd.Env = append(os.Environ(), envWorker+"="+w.id, envAddr+"="+addr,
			envPrefix+"="+prefix, envKeys+"="+strconv.Itoa(keys))
		w.cmd.Stdout = &w.out
		w.cmd.Stderr = os.Stderr
		w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.cmd.Process.Kill() })
		ws = append(ws, w)
	}
	return ws
}

func (w *worker) report(t *testing.T) workerReport {
	var rep workerReport
	line := strings.TrimSpace(w.out.String())
	if i := strings.LastIndexByte(line, '\n'); i >= 0 {
		line = line[i+1:]
	}
	if err := json.Unmarshal([]byte(line), &rep); err != nil {
		t.Fatalf("worker %s: bad report %q: %v", w.id, w.out.String(), err)
	}
	return rep
}

// executions returns the workers that executed each key.
func executions(t *testing.T, c *redis.Client, prefix string, keys int) [][]string {
	out := make([][]string, keys)
	for i := range out {
		l, err := c.LRange(context.Background(), fmt.Sprint(prefix, "exec:k", i), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		out[i] = l
	}
	return out
}

func checkReports(t *testing.T, reps []workerReport) {
	for _, r := range reps {
		if len(r.Wrong) > 0 {
			t.Errorf("worker %s got wrong results for %v", r.Worker, r.Wrong)
		}
		if len(r.Errors) > 0 {
			t.Errorf("worker %s: errors %v", r.Worker, r.Errors)
		}
		if r.MaxWait > workerSettle+3*time.Second {
			t.Errorf("worker %s: a call waited %v, past its settle time %v", r.Worker, r.MaxWait, workerSettle)
		}
	}
}

// Three processes hammer overlapping keys with duplicates: every key runs
// exactly once.
func TestProcessesExactlyOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	prefix := fmt.Sprintf("p%d:", prefixSeq.Add(1))
	const keys = 120
	ws := startWorkers(t, srv.Addr, prefix, 3, keys)
	var reps []workerReport
	for _, w := range ws {
		if err := w.cmd.Wait(); err != nil {
			t.Fatalf("worker %s: %v", w.id, err)
		}
		reps = append(reps, w.report(t))
	}
	checkReports(t, reps)
	for i, ex := range executions(t, c, prefix, keys) {
		if len(ex) != 1 {
			t.Errorf("key k%d executed %d times (by %v)", i, len(ex), ex)
		}
	}
	calls := 0
	for _, r := range reps {
		calls += r.Calls
	}
	if calls != 3*2*8*keys {
		t.Fatalf("%d calls, want %d", calls, 3*2*8*keys)
	}
}

// One of three processes is killed mid-run. Its keys in flight are taken
// over after their lease and complete; they are the only keys that run
// twice, and none runs more than twice.
func TestProcessKilledMidRun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	prefix := fmt.Sprintf("q%d:", prefixSeq.Add(1))
	const keys = 120
	ws := startWorkers(t, srv.Addr, prefix, 3, keys)
	victim := ws[0]
	eventually(t, "the victim executing", func() bool {
		for _, ex := range executions(t, c, prefix, keys) {
			for _, w := range ex {
				if w == victim.id {
					return true
				}
			}
		}
		return false
	})
	time.Sleep(100 * time.Millisecond)
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = victim.cmd.Wait()
	var reps []workerReport
	for _, w := range ws[1:] {
		if err := w.cmd.Wait(); err != nil {
			t.Fatalf("worker %s: %v", w.id, err)
		}
		reps = append(reps, w.report(t))
	}
	checkReports(t, reps)
	twice := 0
	for i, ex := range executions(t, c, prefix, keys) {
		switch {
		case len(ex) == 0 || len(ex) > 2:
			t.Errorf("key k%d executed %d times (by %v)", i, len(ex), ex)
		case len(ex) == 2:
			twice++
			if ex[0] != victim.id {
				t.Errorf("key k%d ran twice, first by %s, not by the killed worker %s", i, ex[0], victim.id)
			}
		}
	}
	t.Logf("%d keys were taken over from the killed worker", twice)
}
