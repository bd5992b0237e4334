package redisstore_test

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/idemrt/idem/internal/redistest"
)

// The failover tests run three worker processes (failover_worker_test.go)
// on a Redis Cluster of 3 masters with a replica each, fail one master
// while they run, and read their ledgers. One cluster serves every
// scenario: a paused master comes back as its replica's replica, a killed
// one is restarted and rejoins as one.

// failoverRun is one scenario's outcome, read from the ledgers.
type failoverRun struct {
	name        string
	fault       time.Time       // when the master was failed
	promoted    time.Time       // when every live node saw its replica serve its slots
	failedAddrs map[string]bool // the failed master and its promoted replica
	promotedTo  string
	runs        map[string][]ledgerLine // R lines per key
	dones       map[string][]ledgerLine // D lines per key
	errs        map[string]int          // E lines per class
}

type ledgerLine struct {
	key, val, node string
	at             time.Time
}

func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of cluster failovers")
	}
	cl := redistest.StartReplicatedCluster(t, 3, redistest.ReplicatedOptions{})
	scenarios := []struct {
		name string
		wait int
		kill bool
	}{
		{"kill", 0, true},
		{"pause", 0, false},
		{"pause-wait1", 1, false},
	}
	for i, sc := range scenarios {
		ok := t.Run(sc.name, func(t *testing.T) {
			r := failover(t, cl, fmt.Sprintf("fo%d:", i), sc.wait, sc.kill)
			r.name = sc.name
			r.check(t, sc.wait > 0)
		})
		if !ok {
			return
		}
	}
}

// failover runs the workers for a while, fails the master of key f0
// (SIGKILL, or SIGSTOP until its replica is promoted and then SIGCONT),
// lets them run on, and reads their ledgers.
func failover(t *testing.T, cl *redistest.ReplicatedCluster, prefix string, wait int, kill bool) *failoverRun {
	cl.WaitReplicated(t, 30*time.Second)
	dir := t.TempDir()
	var ws []*exec.Cmd
	var stdins []io.Closer
	for i := range 3 {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(),
			envFailoverWorker+"="+strconv.Itoa(i),
			envFailoverAddrs+"="+strings.Join(cl.Addrs(), ","),
			envFailoverWait+"="+strconv.Itoa(wait),
			envFailoverPrefix+"="+prefix,
			envFailoverLedger+"="+filepath.Join(dir, strconv.Itoa(i)))
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill() })
		ws, stdins = append(ws, cmd), append(stdins, in)
	}
	time.Sleep(4 * time.Second)
	victim := cl.Masters(t)[0]
	r := &failoverRun{failedAddrs: map[string]bool{victim.Addr: true}}
	r.fault = time.Now()
	if kill {
		victim.Kill()
	} else {
		victim.Pause()
	}
	promoted, took := cl.WaitPromoted(t, victim, 20*time.Second)
	r.promoted = time.Now()
	r.failedAddrs[promoted.Addr], r.promotedTo = true, promoted.Addr
	t.Logf("%s failed; %s serves its slots %v later", victim.Addr, promoted.Addr, took.Round(10*time.Millisecond))
	if kill {
		victim.Restart() // it rejoins as the promoted node's replica
	} else {
		victim.Resume()
	}
	time.Sleep(7 * time.Second)
	for _, in := range stdins {
		in.Close()
	}
	for i, w := range ws {
		if err := w.Wait(); err != nil {
			t.Fatalf("worker %d: %v", i, err)
		}
	}
	r.read(t, dir, len(ws))
	return r
}

func (r *failoverRun) read(t *testing.T, dir string, n int) {
	r.runs, r.dones, r.errs = map[string][]ledgerLine{}, map[string][]ledgerLine{}, map[string]int{}
	for i := range n {
		f, err := os.Open(filepath.Join(dir, strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			p := strings.Fields(sc.Text())
			if len(p) != 5 {
				t.Fatalf("ledger line %q", sc.Text())
			}
			ms, err := strconv.ParseInt(p[4], 10, 64)
			if err != nil {
				t.Fatalf("ledger line %q", sc.Text())
			}
			l := ledgerLine{key: p[1], val: p[2], node: p[3], at: time.UnixMilli(ms)}
			switch p[0] {
			case "R":
				r.runs[l.key] = append(r.runs[l.key], l)
			case "D":
				r.dones[l.key] = append(r.dones[l.key], l)
			case "E":
				r.errs[l.val]++
			}
		}
		f.Close()
	}
}

// excused reports whether the key's double run or diverging results are
// ones that a failover without WAIT cannot prevent: a run or a result of
// the key was acknowledged by the failed master within the fault window
// (from a second before the fault to a second after the promotion: a
// paused master answers what it had queued when it resumes).
func (r *failoverRun) excused(key string) bool {
	from, to := r.fault.Add(-time.Second), r.promoted.Add(time.Second)
	for _, ls := range [][]ledgerLine{r.runs[key], r.dones[key]} {
		for _, l := range ls {
			if r.failedAddrs[l.node] && !l.at.Before(from) && !l.at.After(to) {
				return true
			}
		}
	}
	return false
}

func (r *failoverRun) check(t *testing.T, strict bool) {
	calls, doubles, diverging, unexcused := 0, 0, 0, 0
	for key, runs := range r.runs {
		vals := map[string]bool{}
		for _, d := range r.dones[key] {
			vals[d.val] = true
		}
		calls += len(r.dones[key])
		double, diverge := len(runs) > 1, len(vals) > 1
		if double {
			doubles++
		}
		if diverge {
			diverging++
		}
		if !double && !diverge {
			continue
		}
		if strict || !r.excused(key) {
			unexcused++
			t.Errorf("key %s: runs %v, results %v", key, runs, r.dones[key])
		}
	}
	// Recovery: the first call on the failed master's slots that succeeded
	// on the promoted replica after the promotion; throughput on the other masters from fault to
	// promotion against the 4 s before the fault.
	recovered := time.Time{}
	before, during := 0, 0
	for _, ds := range r.dones {
		for _, d := range ds {
			if r.failedAddrs[d.node] {
				if d.node == r.promotedTo && d.at.After(r.promoted) && (recovered.IsZero() || d.at.Before(recovered)) {
					recovered = d.at
				}
				continue
			}
			switch {
			case d.at.After(r.fault.Add(-4*time.Second)) && d.at.Before(r.fault):
				before++
			case d.at.After(r.fault) && d.at.Before(r.promoted):
				during++
			}
		}
	}
	ratio := 0.0
	if span := r.promoted.Sub(r.fault); before > 0 && span > 0 {
		ratio = (float64(during) / span.Seconds()) / (float64(before) / 4)
	}
	t.Logf("%s: %d keys, %d calls ok, errors %v; %d keys ran twice, %d gave diverging results; failed slots served again %v after the promotion; other masters at %.2f of their rate from fault to promotion",
		r.name, len(r.runs), calls, r.errs, doubles, diverging, recovered.Sub(r.promoted).Round(time.Millisecond), ratio)
	if recovered.IsZero() {
		t.Errorf("the failed master's slots never served again")
	} else if d := recovered.Sub(r.promoted); d > 5*time.Second {
		t.Errorf("the failed master's slots served again %v after the promotion, want within 5s", d)
	}
}
