package river_test

// The crash tests re-execute this test binary as a worker process that
// takes a job, makes its effect and is SIGKILLed mid-job; River then
// rescues the job (RescueStuckJobsAfter shortened) and a worker of the
// test runs it again. Effects are rows of the effects table, counted
// outside the processes.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	idemriver "github.com/idemrt/idem/consume/river"
	"github.com/idemrt/idem/store/pgstore"
)

const (
	envChild = "IDEM_RIVER_CHILD" // the child's form: "plain" or "tx"
	envDSN   = "IDEM_RIVER_DSN"   // the test's database
)

const (
	childLease  = time.Second     // the idem lease, in the child and the test
	jobTimeout  = time.Second     // River's JobTimeout
	rescueAfter = 2 * time.Second // River's RescueStuckJobsAfter
)

// midJob is the line the child prints once its effect is made (in its
// transaction, for the tx form), before it blocks for ever.
const midJob = "mid-job"

// childMain runs a worker process until it is killed.
func childMain(role string) int {
	if err := runChild(role); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 2
	}
	return 0
}

func runChild(role string) error {
	ctx := context.Background()
	dsn := os.Getenv(envDSN)
	pools := make([]*pgxpool.Pool, 3) // River's, the store's, the work's
	for i := range pools {
		p, err := pgxpool.New(ctx, dsn)
		if err != nil {
			return err
		}
		defer p.Close()
		pools[i] = p
	}
	st, err := pgstore.New(ctx, pools[1], pgstore.Options{})
	if err != nil {
		return err
	}
	defer st.Close()
	rt, err := idem.New(idem.Options{Store: st, Policy: idem.Policy{Lease: childLease}})
	if err != nil {
		return err
	}
	defer rt.Close(ctx)
	c, err := consume.New(consume.Options{Runtime: rt, Logger: quiet})
	if err != nil {
		return err
	}
	block := func(ctx context.Context, db dbExec, job *river.Job[ChargeArgs]) error {
		if err := effect(ctx, db, job.Args.Order, "child"); err != nil {
			return err
		}
		fmt.Println(midJob)
		select {} // until killed
	}
	opts := idemriver.Options[ChargeArgs]{Consumer: c, Logger: quiet}
	var w *idemriver.Worker[ChargeArgs]
	switch role {
	case "plain":
		w, err = idemriver.NewWorker(opts, func(ctx context.Context, job *river.Job[ChargeArgs]) error {
			return block(ctx, pools[2], job)
		})
	case "tx":
		w, err = idemriver.NewTxWorker(ctx, pools[2], opts, func(ctx context.Context, tx pgx.Tx, job *river.Job[ChargeArgs]) error {
			return block(ctx, tx, job)
		})
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		return err
	}
	workers := river.NewWorkers()
	if err := river.AddWorkerSafely(workers, w); err != nil {
		return err
	}
	cfg := config(workers)
	cfg.TestOnly = false
	cfg.LeaderElectionDisabled = true // the test's client is the leader that rescues
	cfg.JobTimeout = jobTimeout
	cfg.RescueStuckJobsAfter = rescueAfter
	rc, err := river.NewClient(riverpgxv5.New(pools[0]), cfg)
	if err != nil {
		return err
	}
	if err := rc.Start(ctx); err != nil {
		return err
	}
	select {} // until killed
}

// TestWorkerKilledMidJob kills a worker process mid-job, after its effect
// and before its result is stored (or its transaction committed); River
// rescues the job and a worker of the test runs it again. Effects: at most
// two with the plain form (the dead run's, and the rescued run's once the
// dead run's lease has ended), exactly one with the transactional form
// (the dead run's transaction rolled back).
func TestWorkerKilledMidJob(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		form string
		want int
	}{{"plain", 2}, {"tx", 1}} {
		t.Run(tc.form, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			key := order()
			ins := e.inserter(t)
			id := insert(t, ins, ChargeArgs{Order: key})

			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), envChild+"="+tc.form, envDSN+"="+e.dsn)
			cmd.Stderr = os.Stderr
			out, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			killed := false
			t.Cleanup(func() {
				if !killed {
					_ = cmd.Process.Kill()
					_ = cmd.Wait()
				}
			})
			lines := make(chan string)
			go func() {
				defer close(lines)
				s := bufio.NewScanner(out)
				for s.Scan() {
					lines <- s.Text()
				}
			}()
			deadline := time.After(20 * time.Second)
		wait:
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatal("the child exited before it was mid-job")
					}
					if strings.TrimSpace(l) == midJob {
						break wait
					}
				case <-deadline:
					t.Fatal("the child did not get mid-job")
				}
			}
			_ = cmd.Process.Kill() // SIGKILL
			_ = cmd.Wait()
			killed = true
			for range lines { // the pipe is closed: drain the reader
			}
			if n := e.effects(t, key); n != tc.want-1 {
				t.Fatalf("%d effects after the kill; want %d", n, tc.want-1)
			}

			// The job is stuck in running; River's rescuer (on the leader,
			// the test's client) takes it back once it has run for
			// rescueAfter. The rescuer runs when the client starts and
			// then every 30s: start the client once the job is stuck.
			job, err := ins.JobGet(testCtx(t), id)
			if err != nil {
				t.Fatal(err)
			}
			if job.State != rivertype.JobStateRunning || job.AttemptedAt == nil {
				t.Fatalf("job is %s after the kill; want running", job.State)
			}
			time.Sleep(time.Until(job.AttemptedAt.Add(rescueAfter + 200*time.Millisecond)))

			opts := idemriver.Options[ChargeArgs]{Consumer: consumer(t, e.rt), Logger: quiet}
			work := func(ctx context.Context, db dbExec, job *river.Job[ChargeArgs]) error {
				return effect(ctx, db, job.Args.Order, "rescued")
			}
			var w *idemriver.Worker[ChargeArgs]
			if tc.form == "plain" {
				w, err = idemriver.NewWorker(opts, func(ctx context.Context, job *river.Job[ChargeArgs]) error {
					return work(ctx, e.work, job)
				})
			} else {
				w, err = idemriver.NewTxWorker(testCtx(t), e.work, opts, func(ctx context.Context, tx pgx.Tx, job *river.Job[ChargeArgs]) error {
					return work(ctx, tx, job)
				})
			}
			if err != nil {
				t.Fatal(err)
			}
			workers := river.NewWorkers()
			if err := river.AddWorkerSafely(workers, w); err != nil {
				t.Fatal(err)
			}
			cfg := config(workers)
			cfg.TestOnly = false
			cfg.JobTimeout = jobTimeout
			cfg.RescueStuckJobsAfter = rescueAfter
			rc := start(t, e.river, cfg)
			job = e.state(t, rc, id, rivertype.JobStateCompleted)
			if job.Attempt != 2 {
				t.Fatalf("completed at attempt %d; want 2 (the rescued run)", job.Attempt)
			}
			if !rescued(job) {
				t.Fatalf("the job's errors %v do not show a rescue", job.Errors)
			}
			n := e.effects(t, key)
			t.Logf("%s form: %d effect(s) after a worker SIGKILLed mid-job and the job rescued", tc.form, n)
			if n != tc.want {
				t.Fatalf("%d effects; want %d", n, tc.want)
			}
		})
	}
}

// rescued reports whether River's rescuer recorded an error on job.
func rescued(job *rivertype.JobRow) bool {
	for _, e := range job.Errors {
		if strings.Contains(e.Error, "rescued") {
			return true
		}
	}
	return false
}
