package mailbox

import "sync"

// IOWorker runs one shard's store batches on one long-lived goroutine, off
// the actor's goroutine, so a slow store never stalls the actor. It holds at
// most one job: a shard never has more than one batch in flight.
type IOWorker struct {
	jobs chan func()
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// NewIOWorker starts an IOWorker's goroutine.
func NewIOWorker() *IOWorker {
	w := &IOWorker{jobs: make(chan func(), 1), done: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			select {
			case job := <-w.jobs:
				job()
			case <-w.done:
				return
			}
		}
	}()
	return w
}

// Submit hands a job to the worker. It reports false, and drops the job,
// after Stop.
func (w *IOWorker) Submit(job func()) bool {
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
func (w *IOWorker) Stop() {
	w.Halt()
	w.wg.Wait()
}

// Halt tells the goroutine to end after the job it is running, if any,
// without waiting for that job: a shutdown whose deadline has passed must
// not hang on a store that does not answer. It is idempotent.
func (w *IOWorker) Halt() { w.once.Do(func() { close(w.done) }) }
