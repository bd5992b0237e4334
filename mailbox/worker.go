package mailbox

import "sync"

// Worker runs jobs one at a time, in order, on one long-lived goroutine,
// with room for one queued job. A shard has two:
//
//   - one runs its mailbox (package actors adapts it as protoactor's
//     dispatcher): a mailbox asks for a run only when it goes from idle to
//     running, so at most one run is ever queued;
//   - one runs its store I/O: the shard has at most one batch in flight, so
//     a slow store never stalls the actor and Submit never waits for a job
//     that is running.
//
// Stop ends the goroutine; a job handed over after Stop is dropped (the
// actor is gone by then and its messages go nowhere).
type Worker struct {
	jobs chan func()
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// NewWorker starts a Worker's goroutine.
func NewWorker() *Worker {
	w := &Worker{jobs: make(chan func(), 1), done: make(chan struct{})}
	w.wg.Add(1)
	go w.loop()
	return w
}

func (w *Worker) loop() {
	defer w.wg.Done()
	for {
		select {
		case job := <-w.jobs:
			job()
		case <-w.done:
			return
		}
	}
}

// Submit hands a job to the worker. It reports false, and drops the job,
// after Stop or Halt.
func (w *Worker) Submit(job func()) bool {
	select {
	case <-w.done:
		return false
	default:
	}
	select {
	case w.jobs <- job:
		return true
	case <-w.done:
		return false
	}
}

// Stop ends the goroutine after the job it is running, if any, and waits for
// it. It is idempotent.
func (w *Worker) Stop() {
	w.Halt()
	w.wg.Wait()
}

// Halt tells the goroutine to end after the job it is running, if any,
// without waiting for that job: a shutdown whose deadline has passed must
// not hang on a store that does not answer. It is idempotent.
func (w *Worker) Halt() { w.once.Do(func() { close(w.done) }) }
