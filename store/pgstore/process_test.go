package pgstore_test

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

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store/pgstore"
)

// The multi-process tests re-execute this test binary as worker processes
// (TestMain sends them to workerMain). Each worker runs its own runtime on
// its own pool and calls every key of a shared set, each twice, in its own
// order, from several goroutines. Each execution records itself in a table
// of executions, so they are counted outside the workers, even for a
// worker that is killed.

const (
	envWorker = "IDEM_TEST_WORKER"
	envDSN    = "IDEM_TEST_DSN"
	envTable  = "IDEM_TEST_TABLE"
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

// execTable is the table of executions of the store's table.
func execTable(table string) string { return pgx.Identifier{table + "_exec"}.Sanitize() }

func workerMain(id string) int {
	ctx := context.Background()
	nkeys, _ := strconv.Atoi(os.Getenv(envKeys))
	table := os.Getenv(envTable)
	pool, err := pgxpool.New(ctx, os.Getenv(envDSN))
	if err != nil {
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 2
	}
	defer pool.Close()
	s, err := pgstore.New(ctx, pool, pgstore.Options{Table: table})
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
					if _, err := pool.Exec(ctx, "INSERT INTO "+execTable(table)+" (key, worker) VALUES ($1, $2)", key, id); err != nil {
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

// startWorkers migrates a new table and its table of executions on the
// shared server, and starts n workers on it.
func startWorkers(t *testing.T, n, keys int) (table string, ws []*worker) {
	table = newTable()
	pool := sharedPool(t)
	newStore(t, pool, pgstore.Options{Table: table})
	if _, err := pool.Exec(bg, "CREATE TABLE "+execTable(table)+" (n bigserial, key text, worker text)"); err != nil {
		t.Fatal(err)
	}
	for i := range n {
		w := &worker{id: strconv.Itoa(i)}
		w.cmd = exec.Command(os.Args[0], "-test.run=^$")
		w.cmd.Env = append(os.Environ(), envWorker+"="+w.id, envDSN+"="+shared.DSN("postgres"),
			envTable+"="+table, envKeys+"="+strconv.Itoa(keys))
		w.cmd.Stdout = &w.out
		w.cmd.Stderr = os.Stderr
		w.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := w.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = w.cmd.Process.Kill() })
		ws = append(ws, w)
	}
	return table, ws
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

// executions returns the workers that executed each key, in order.
func executions(t *testing.T, table string, keys int) [][]string {
	rows, err := sharedPool(t).Query(bg, "SELECT key, worker FROM "+execTable(table)+" ORDER BY n")
	if err != nil {
		t.Fatal(err)
	}
	out := make([][]string, keys)
	var key, w string
	_, err = pgx.ForEachRow(rows, []any{&key, &w}, func() error {
		i, err := strconv.Atoi(strings.TrimPrefix(key, "k"))
		if err != nil || i < 0 || i >= keys {
			return fmt.Errorf("execution of unknown key %q", key)
		}
		out[i] = append(out[i], w)
		return nil
	})
	if err != nil {
		t.Fatal(err)
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
	const keys = 120
	table, ws := startWorkers(t, 3, keys)
	var reps []workerReport
	for _, w := range ws {
		if err := w.cmd.Wait(); err != nil {
			t.Fatalf("worker %s: %v", w.id, err)
		}
		reps = append(reps, w.report(t))
	}
	checkReports(t, reps)
	for i, ex := range executions(t, table, keys) {
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

// One of three processes is killed (SIGKILL) mid-run. Its keys in flight
// are taken over after their lease and complete; they are the only keys
// that run twice, and none runs more than twice.
func TestProcessKilledMidRun(t *testing.T) {
	t.Parallel()
	const keys = 120
	table, ws := startWorkers(t, 3, keys)
	victim := ws[0]
	eventually(t, "the victim executing", func() bool {
		for _, ex := range executions(t, table, keys) {
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
	for i, ex := range executions(t, table, keys) {
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
