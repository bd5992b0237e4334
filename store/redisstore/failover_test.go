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
	failedSlots [][2]int                // the failed master's slot ranges
	restarted   time.Time               // when a killed master was started again
	runs        map[string][]ledgerLine // R lines per key
	dones       map[string][]ledgerLine // D lines per key
	errs        map[string]int          // E lines per class
	reloads     int64                   // slot map reloads, all workers
	unconfirmed int64                   // unconfirmed writes, all workers
}

type ledgerLine struct {
	key, val, node string
	slot           int
	at             time.Time
}

// failed reports whether l's key is in one of the failed master's slots.
func (r *failoverRun) failed(l ledgerLine) bool {
	for _, s := range r.failedSlots {
		if l.slot >= s[0] && l.slot <= s[1] {
			return true
		}
	}
	return false
}

func TestClusterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("a minute of cluster failovers")
	}
	// Its own cluster and worker processes; mostly waiting on the
	// failovers, so the package's other tests run beside it.
	t.Parallel()
	cl := redistest.StartReplicatedCluster(t, 3, redistest.ReplicatedOptions{})
	scenarios := []struct {
		name string
		wait int
		kill bool
	}{
		{"kill", 0, true},
		{"pause", 0, false},
		{"pause-wait1", 1, false},
		{"kill-wait1", 1, true},
	}
	for i, sc := range scenarios {
		ok := t.Run(sc.name, func(t *testing.T) {
			r := failover(t, cl, fmt.Sprintf("fo%d:", i), sc.wait, sc.kill)
			r.name = sc.name
			r.check(t, sc.wait > 0, sc.wait > 0 && sc.kill)
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
	nodes, err := redistest.Topology(victim.Addr)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Addr == victim.Addr {
			r.failedSlots = n.Slots
		}
	}
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
		if wait > 0 {
			// The promoted master has no replica until the victim rejoins:
			// with WaitReplicas its writes are unconfirmed until then.
			time.Sleep(2 * time.Second)
		}
		victim.Restart() // it rejoins as the promoted node's replica
		r.restarted = time.Now()
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
	if os.Getenv("IDEM_FAILOVER_KEEP") != "" {
		keep := filepath.Join(os.TempDir(), "idem-failover-"+prefix)
		_ = os.RemoveAll(keep)
		_ = os.CopyFS(keep, os.DirFS(dir))
		t.Logf("ledgers kept in %s; fault at %d ms, promoted at %d ms", keep, r.fault.UnixMilli(), r.promoted.UnixMilli())
	}
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
			if len(p) == 5 && p[0] == "S" {
				n1, _ := strconv.ParseInt(p[2], 10, 64)
				n2, _ := strconv.ParseInt(p[4], 10, 64)
				r.reloads, r.unconfirmed = r.reloads+n1, r.unconfirmed+n2
				continue
			}
			if len(p) != 6 {
				t.Fatalf("ledger line %q", sc.Text())
			}
			slot, err1 := strconv.Atoi(p[4])
			ms, err2 := strconv.ParseInt(p[5], 10, 64)
			if err1 != nil || err2 != nil {
				t.Fatalf("ledger line %q", sc.Text())
			}
			l := ledgerLine{key: p[1], val: p[2], node: p[3], slot: slot, at: time.UnixMilli(ms)}
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
// ones that a failover without WAIT cannot prevent: the key is in the
// failed master's slots, and a run or a result of it was acknowledged
// within the fault window (from a second before the fault to a second
// after the promotion: a paused master answers what it had queued when it
// resumes, before it learns that it was deposed).
func (r *failoverRun) excused(key string) bool {
	from, to := r.fault.Add(-time.Second), r.promoted.Add(time.Second)
	for _, ls := range [][]ledgerLine{r.runs[key], r.dones[key]} {
		for _, l := range ls {
			if r.failed(l) && !l.at.Before(from) && !l.at.After(to) {
				return true
			}
		}
	}
	return false
}

// check checks the ledgers: no double run and no diverging results but
// excused ones (none when strict), and the failed slots serving again
// within 5 s of the promotion (after a kill with WaitReplicas, writes there
// wait for a replica to join the promoted master: that time is reported,
// not checked).
func (r *failoverRun) check(t *testing.T, strict, waitKill bool) {
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
			t.Errorf("key %s: runs %s; results %s", key, r.show(runs), r.show(r.dones[key]))
		}
	}
	// Recovery: the first call on the failed master's slots that succeeded
	// after the promotion (reads: a replay of a stored result), and the
	// first run there whose result was delivered (writes: a claim and its
	// completion); throughput on the other masters from fault to promotion
	// against the 4 s before the fault.
	var read, wrote time.Time
	first := func(t *time.Time, at time.Time) {
		if at.After(r.promoted) && (t.IsZero() || at.Before(*t)) {
			*t = at
		}
	}
	before, during := 0, 0
	for key, ds := range r.dones {
		delivered := map[string]bool{}
		for _, d := range ds {
			delivered[d.val] = true
			if r.failed(d) {
				first(&read, d.at)
				continue
			}
			switch {
			case d.at.After(r.fault.Add(-4*time.Second)) && d.at.Before(r.fault):
				before++
			case d.at.After(r.fault) && d.at.Before(r.promoted):
				during++
			}
		}
		for _, run := range r.runs[key] {
			if r.failed(run) && delivered[run.val] {
				first(&wrote, run.at)
			}
		}
	}
	ratio := 0.0
	if span := r.promoted.Sub(r.fault); before > 0 && span > 0 {
		ratio = (float64(during) / span.Seconds()) / (float64(before) / 4)
	}
	t.Logf("%s: %d keys, %d calls ok, errors %v; %d keys ran twice, %d gave diverging results; failed slots served reads again %v and ran new keys again %v after the promotion; other masters at %.2f of their rate from fault to promotion; %d slot map reloads, %d unconfirmed writes",
		r.name, len(r.runs), calls, r.errs, doubles, diverging, since(read, r.promoted), since(wrote, r.promoted), ratio, r.reloads, r.unconfirmed)
	if waitKill && !wrote.IsZero() {
		t.Logf("%s: new keys ran again %v after the killed master was restarted", r.name, wrote.Sub(r.restarted).Round(time.Millisecond))
		if wrote.Before(r.restarted) {
			t.Errorf("a write on the failed slots was confirmed before a replica joined the promoted master")
		}
	}
	if r.reloads == 0 {
		t.Errorf("no worker's store reloaded the slot map")
	}
	if read.IsZero() || wrote.IsZero() {
		t.Errorf("the failed master's slots never served again")
	} else if d := wrote.Sub(r.promoted); d > 5*time.Second && !waitKill {
		t.Errorf("the failed master's slots ran keys again %v after the promotion, want within 5s", d)
	}
}

func since(t, from time.Time) any {
	if t.IsZero() {
		return "never"
	}
	return t.Sub(from).Round(time.Millisecond)
}

// show lists ledger lines as value@node+time since the fault.
func (r *failoverRun) show(ls []ledgerLine) string {
	var b strings.Builder
	for _, l := range ls {
		fmt.Fprintf(&b, " %s@%s%+v", l.val, l.node, l.at.Sub(r.fault))
	}
	return b.String()
}
