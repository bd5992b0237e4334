package pgtx_test

// Tests with real processes: a child process of this test binary runs a
// transactional function and is killed or stopped at a chosen point, and
// another process (the test itself, or other children) retries the key.

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/pgtx"
	"github.com/idemrt/idem/store/pgstore"
)

// childEnv names the child's role; PGTX_DSN, PGTX_KEY, PGTX_LEASE and
// PGTX_KEYS tell it the rest.
const childEnv = "PGTX_TEST_CHILD"

// childMain runs the role name and returns the exit code.
func childMain(name string) int {
	if err := child(name); err != nil {
		fmt.Println("error:", err)
		return 1
	}
	return 0
}

// child runs one role. It says where it is on stdout, one line per step;
// where its role waits, it reads a line from stdin.
func child(name string) error {
	ctx := context.Background()
	dsn, key := os.Getenv("PGTX_DSN"), os.Getenv("PGTX_KEY")
	lease, err := time.ParseDuration(os.Getenv("PGTX_LEASE"))
	if err != nil {
		return err
	}
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer pool.Close()
	work, err := pgxpool.New(ctx, dsn)
	if err != nil {
		return err
	}
	defer work.Close()
	st, err := pgstore.New(ctx, pool, pgstore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	rt, err := idem.New(idem.Options{Store: st, Policy: idem.Policy{Lease: lease}})
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	in := bufio.NewReader(os.Stdin)
	say := func(s string) { fmt.Println(s) }
	wait := func() { _, _ = in.ReadString('\n') }
	insert := func(ctx context.Context, tx pgx.Tx, key, run string) (int64, error) {
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO charges (key, run, amount) VALUES ($1, $2, 100) RETURNING id`, key, run).Scan(&id)
		return id, err
	}
	switch name {
	case "wait-in-fn", "wait-after-commit":
		_, err := pgtx.Do(ctx, rt, work, key, func(ctx context.Context, tx pgx.Tx) (int64, error) {
			id, err := insert(ctx, tx, key, "child")
			if err == nil && name == "wait-in-fn" {
				say("inserted")
				wait()
			}
			return id, err
		})
		if err != nil {
			say("result: " + err.Error())
			return nil
		}
		say("committed")
		if name == "wait-after-commit" {
			wait()
		}
	case "wait-after-statement":
		pgtx.SetAfterStatement(func() {
			say("statement")
			wait()
		})
		_, err := pgtx.Do(ctx, rt, work, key, func(ctx context.Context, tx pgx.Tx) (int64, error) {
			return insert(ctx, tx, key, "child")
		})
		if err != nil {
			say("result: " + err.Error())
			return nil
		}
		say("committed")
	case "worker":
		keys := strings.Split(os.Getenv("PGTX_KEYS"), ",")
		rand.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
		run := fmt.Sprint("worker-", os.Getpid())
		for _, k := range keys {
			_, err := pgtx.Do(ctx, rt, work, k, func(ctx context.Context, tx pgx.Tx) (int64, error) {
				id, err := insert(ctx, tx, k, run)
				time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
				return id, err
			})
			if err != nil && !errors.Is(err, idem.ErrConflict) {
				say("call error: " + err.Error())
			}
			say("did " + k)
		}
		say("done")
	default:
		return fmt.Errorf("unknown role %q", name)
	}
	return nil
}

// proc is a child process.
type proc struct {
	t     testing.TB
	cmd   *exec.Cmd
	stdin io.WriteCloser
	lines chan string
	exit  chan error
}

func startChild(t testing.TB, role, dsn, key string, lease time.Duration, extra ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, "PGTX_DSN="+dsn, "PGTX_KEY="+key, "PGTX_LEASE="+lease.String())
	cmd.Env = append(cmd.Env, extra...)
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &proc{t: t, cmd: cmd, stdin: stdin, lines: make(chan string, 1000), exit: make(chan error, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.lines <- sc.Text()
		}
		close(p.lines)
		p.exit <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		<-p.exit
	})
	return p
}

// expect waits for the child to say a line starting with prefix, and
// returns it.
func (p *proc) expect(prefix string) string {
	p.t.Helper()
	deadline := time.After(idemtest.Timeout)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				p.t.Fatalf("child exited before saying %q", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return l
			}
			if strings.HasPrefix(l, "error:") {
				p.t.Fatalf("child: %s", l)
			}
		case <-deadline:
			p.t.Fatalf("child did not say %q", prefix)
		}
	}
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

func (p *proc) kill() {
	p.t.Helper()
	p.signal(syscall.SIGKILL)
	for range p.lines {
	}
	<-p.exit
	p.exit <- nil // for the cleanup
}

func (p *proc) proceed() {
	p.t.Helper()
	if _, err := io.WriteString(p.stdin, "go\n"); err != nil {
		p.t.Fatal(err)
	}
}

// retry calls pgtx.Do on key from this process and returns the value, the
// claim fn saw (if it ran) and the outcome.
func retry(t testing.TB, e *env, rt *idem.Runtime, key string) (int64, idem.Claim, idem.Outcome) {
	t.Helper()
	var c idem.Claim
	var out idem.Outcome
	id, err := pgtx.Do(bg, rt, e.work, key, func(ctx context.Context, tx pgx.Tx) (int64, error) {
		c, _ = idem.ClaimFrom(ctx)
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO charges (key, run, amount) VALUES ($1, 'retry', 100) RETURNING id`, key).Scan(&id)
		return id, err
	}, idem.WithOutcome(&out))
	if err != nil {
		t.Fatalf("retry of %s: %v", key, err)
	}
	return id, c, out
}

const childLease = time.Second

// A child killed inside fn, its row inserted but not committed: the retry
// waits out its lease, takes the key over (attempt 2), and one row results.
func TestKilledInsideFnRunsOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	p := startChild(t, "wait-in-fn", e.dsn, "k", childLease)
	p.expect("inserted")
	p.kill()
	rt := e.runtime(t, idem.Options{})
	_, c, out := retry(t, e, rt, "k")
	if out != idem.Executed || !c.Takeover || c.Attempt != 2 {
		t.Fatalf("retry: %v, claim %+v; want executed as a takeover at attempt 2", out, c)
	}
	e.wantRows(t, "k", 1)
}

// A child killed after its COMMIT: the retry replays, one row.
func TestKilledAfterCommitReplays(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	p := startChild(t, "wait-after-commit", e.dsn, "k", childLease)
	p.expect("committed")
	p.kill()
	rt := e.runtime(t, idem.Options{})
	if _, _, out := retry(t, e, rt, "k"); out != idem.Replayed {
		t.Fatalf("retry: %v, want replayed", out)
	}
	e.wantRows(t, "k", 1)
}

// A child stopped inside fn past its lease while this process takes the
// key and commits: resumed, its completion finds the key taken, its COMMIT
// never happens, and its row is absent.
func TestStoppedOwnerLosesTheKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	p := startChild(t, "wait-in-fn", e.dsn, "k", childLease)
	p.expect("inserted")
	p.signal(syscall.SIGSTOP)
	rt := e.runtime(t, idem.Options{})
	_, c, out := retry(t, e, rt, "k")
	if out != idem.Executed || !c.Takeover {
		t.Fatalf("retry: %v, claim %+v; want a takeover", out, c)
	}
	p.signal(syscall.SIGCONT)
	p.proceed()
	if l := p.expect("result:"); !strings.Contains(l, "lease") {
		t.Fatalf("the stopped owner said %q, want its lease lost", l)
	}
	var runs string
	if err := e.work.QueryRow(bg, `SELECT string_agg(run, ',') FROM charges WHERE key = 'k'`).Scan(&runs); err != nil {
		t.Fatal(err)
	}
	if runs != "retry" {
		t.Fatalf("rows by %q, want only the retry's", runs)
	}
}

// A child stopped after its completion statement, before COMMIT: the
// server ends its idle transaction within the lease, the key is taken over
// here, and one row results.
func TestStoppedAfterStatementFreesTheKey(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	p := startChild(t, "wait-after-statement", e.dsn, "k", childLease)
	p.expect("statement")
	p.signal(syscall.SIGSTOP)
	stopped := time.Now()
	rt := e.runtime(t, idem.Options{})
	_, c, out := retry(t, e, rt, "k")
	if out != idem.Executed || !c.Takeover {
		t.Fatalf("retry: %v, claim %+v; want a takeover", out, c)
	}
	t.Logf("the key was taken over %v after the owner stopped (lease %v)", time.Since(stopped), childLease)
	p.signal(syscall.SIGCONT)
	p.proceed()
	if l := p.expect("result:"); l == "" {
		t.Fatal("no result")
	}
	e.wantRows(t, "k", 1)
}

// Three worker processes run the same keys, each fn inserting a row with
// its own run id (no constraint on the key to help); one is killed
// mid-run. Every key ends with exactly one row.
func TestChaosEveryKeyOneRow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, shared)
	keys := make([]string, 60)
	for i := range keys {
		keys[i] = fmt.Sprint("key-", i)
	}
	list := "PGTX_KEYS=" + strings.Join(keys, ",")
	var workers []*proc
	for range 3 {
		workers = append(workers, startChild(t, "worker", e.dsn, "", childLease, list))
	}
	workers[0].expect("did ")
	workers[0].expect("did ")
	workers[0].kill()
	var wg sync.WaitGroup
	for _, w := range workers[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.expect("done")
		}()
	}
	wg.Wait()
	// Keys the killed worker held are finished here, after its lease.
	rt := e.runtime(t, idem.Options{})
	for _, k := range keys {
		retry(t, e, rt, k)
	}
	rows, err := e.work.Query(bg, `SELECT key, count(*) FROM charges GROUP BY key`)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		counts[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if counts[k] != 1 {
			t.Errorf("key %s has %d rows, want 1", k, counts[k])
		}
	}
}
