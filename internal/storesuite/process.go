package storesuite

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemrt/idem/internal/idemtest"
)

// The multi-process checks re-execute the test binary as worker processes
// (the test package's TestMain sends them to WorkerMain). Each worker runs
// its own runtime on its own connection to the store and calls every key
// of a shared set, each twice, in its own order, from several goroutines.
// Each execution records itself on the server, outside the store, so the
// executions are counted outside the workers, even for a worker that is
// killed.

const (
	envWorker = "IDEM_TEST_WORKER"
	envKeys   = "IDEM_TEST_KEYS"
)

const (
	workerLease  = time.Second
	workerSettle = 8 * time.Second
	workerWork   = 30 * time.Millisecond
	workerKeys   = 120
)

// Processes is a deployment that worker processes join.
type Processes struct {
	// Env tells a worker where its store is (its open reads it).
	Env []string
	// Executions returns the workers that executed each key k0..k<keys-1>,
	// in order.
	Executions func(t testing.TB, keys int) [][]string
}

type worker struct {
	id  string
	cmd *exec.Cmd
	out bytes.Buffer
}

func (p Processes) start(t *testing.T, n int) []*worker { return p.startFrom(t, 0, n) }

// startFrom starts n workers with the ids first, first+1, ...
func (p Processes) startFrom(t *testing.T, first, n int) []*worker {
	var ws []*worker
	for i := first; i < first+n; i++ {
		w := &worker{id: strconv.Itoa(i)}
		w.cmd = exec.Command(os.Args[0], "-test.run=^$")
		w.cmd.Env = append(os.Environ(), envWorker+"="+w.id, envKeys+"="+strconv.Itoa(workerKeys))
		w.cmd.Env = append(w.cmd.Env, p.Env...)
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

// ExactlyOnce checks three processes hammering overlapping keys with
// duplicates: every key runs exactly once.
func ExactlyOnce(t *testing.T, p Processes) {
	const keys = workerKeys
	ws := p.start(t, 3)
	var reps []workerReport
	for _, w := range ws {
		if err := w.cmd.Wait(); err != nil {
			t.Fatalf("worker %s: %v", w.id, err)
		}
		reps = append(reps, w.report(t))
	}
	checkReports(t, reps)
	for i, ex := range p.Executions(t, keys) {
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

// KilledMidRun checks one of three processes killed (SIGKILL) mid-run. Its
// keys in flight are taken over after their lease and complete; they are
// the only keys that run twice, and none runs more than twice.
func KilledMidRun(t *testing.T, p Processes) {
	const keys = workerKeys
	// The victim starts alone: on a loaded machine, workers started with
	// it could run every key before it ran one.
	victim := p.start(t, 1)[0]
	idemtest.Eventually(t, "the victim executing", func() bool {
		for _, ex := range p.Executions(t, keys) {
			for _, w := range ex {
				if w == victim.id {
					return true
				}
			}
		}
		return false
	})
	ws := append([]*worker{victim}, p.startFrom(t, 1, 2)...)
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
	for i, ex := range p.Executions(t, keys) {
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
