package mailbox

import "sync"

// Worker is a protoactor dispatcher that runs every mailbox run of one actor
// on a single long-lived goroutine. A mailbox asks for a run only when it goes
// from idle to running, so at most one run is ever queued; a buffer of one
// keeps Schedule from blocking.
//
// Stop ends the goroutine; a run scheduled after Stop is dropped (the actor
// is gone by then and its messages go nowhere).
type Worker struct {
	runs chan func()
	done chan struct{}
	wg   sync.WaitGroup
	once sync.Once
}

// NewWorker starts a Worker's goroutine.
func NewWorker() *Worker {
	w := &Worker{runs: make(chan func(), 1), done: make(chan struct{})}
	w.wg.Add(1)
	go w.loop()
	return w
}

func (w *Worker) loop() {
	defer w.wg.Done()
	for {
		select {
		case fn := <-w.runs:
			fn()
		case <-w.done:
			return
		}
	}
}

// Schedule hands a mailbox run to the worker goroutine.
func (w *Worker) Schedule(fn func()) {
	select {
	case w.runs <- fn:
	case <-w.done:
	}
}

// Throughput is how many messages a run handles before it yields the
// processor (protoactor calls runtime.Gosched then; it does not end the run).
func (w *Worker) Throughput() int { return 300 }

// Stop ends the worker goroutine and waits for it. It is idempotent.
func (w *Worker) Stop() {
	w.once.Do(func() { close(w.done) })
	w.wg.Wait()
}
