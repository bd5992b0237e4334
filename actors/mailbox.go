package actors

import (
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/asynkron/protoactor-go/actor"
)

// shardMailbox is a shard actor's mailbox: protoactor's default unbounded
// mailbox (system messages first, suspension, a yield every Throughput
// messages, panics escalated to the supervisor), without what a shard does
// not use (message batches, mailbox middleware) and without its one
// allocation per wake-up: the default hands its dispatcher a new method
// value each time an idle mailbox gets a message, about once per call
// under light load. This one binds its run function once.
type shardMailbox struct {
	user   msgQueue
	system msgQueue

	running   atomic.Bool
	userN     atomic.Int32
	sysN      atomic.Int32
	suspended atomic.Bool

	invoker    actor.MessageInvoker
	dispatcher actor.Dispatcher
	runFn      func() // m.process, bound once
}

func newShardMailbox() actor.Mailbox { return new(shardMailbox) }

// PostUserMessage implements actor.Mailbox.
func (m *shardMailbox) PostUserMessage(msg any) {
	m.user.push(msg)
	m.userN.Add(1)
	m.schedule()
}

// PostSystemMessage implements actor.Mailbox.
func (m *shardMailbox) PostSystemMessage(msg any) {
	m.system.push(msg)
	m.sysN.Add(1)
	m.schedule()
}

// RegisterHandlers implements actor.Mailbox.
func (m *shardMailbox) RegisterHandlers(invoker actor.MessageInvoker, dispatcher actor.Dispatcher) {
	m.invoker, m.dispatcher = invoker, dispatcher
	m.runFn = m.process
}

// Start implements actor.Mailbox.
func (m *shardMailbox) Start() {}

// UserMessageCount implements actor.Mailbox.
func (m *shardMailbox) UserMessageCount() int { return int(m.userN.Load()) }

func (m *shardMailbox) schedule() {
	if m.running.CompareAndSwap(false, true) {
		m.dispatcher.Schedule(m.runFn)
	}
}

// process runs the queued messages, then goes idle, unless a message came
// in between that nobody else will schedule.
func (m *shardMailbox) process() {
	for {
		m.run()
		m.running.Store(false)
		// A count below zero is a poster between its push and its count:
		// the message was handled already, and the poster's own schedule
		// will run the mailbox again if anything is left. Going idle here,
		// not spinning until the poster counts, matters when it is not
		// running.
		if m.sysN.Load() <= 0 && (m.suspended.Load() || m.userN.Load() <= 0) {
			return
		}
		if !m.running.CompareAndSwap(false, true) {
			return // a poster scheduled a run
		}
	}
}

func (m *shardMailbox) run() {
	var msg any
	defer func() {
		if r := recover(); r != nil {
			m.invoker.EscalateFailure(r, msg)
		}
	}()
	for i, most := 0, m.dispatcher.Throughput(); ; i++ {
		if i > most {
			i = 0
			runtime.Gosched()
		}
		if msg = m.system.pop(); msg != nil {
			m.sysN.Add(-1)
			switch msg.(type) {
			case *actor.SuspendMailbox:
				m.suspended.Store(true)
			case *actor.ResumeMailbox:
				m.suspended.Store(false)
			default:
				m.invoker.InvokeSystemMessage(msg)
			}
			continue
		}
		if m.suspended.Load() {
			return
		}
		if msg = m.user.pop(); msg == nil {
			return
		}
		m.userN.Add(-1)
		m.invoker.InvokeUserMessage(msg)
	}
}

// msgQueue is a FIFO of messages for many senders and one reader. Its
// memory is reused: from the start once it drains, and moved down once
// most of it is read.
type msgQueue struct {
	mu   sync.Mutex
	buf  []any
	head int
}

func (q *msgQueue) push(msg any) {
	q.mu.Lock()
	if q.head > 64 && q.head > len(q.buf)/2 {
		// A queue that never drains still reuses its memory.
		n := copy(q.buf, q.buf[q.head:])
		clear(q.buf[n:])
		q.buf, q.head = q.buf[:n], 0
	}
	q.buf = append(q.buf, msg)
	q.mu.Unlock()
}

// maxIdleQueue is the most slots a drained queue keeps for the next burst.
const maxIdleQueue = 4096

// pop returns the oldest message, or nil when there is none.
func (q *msgQueue) pop() any {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.buf) {
		return nil
	}
	msg := q.buf[q.head]
	q.buf[q.head] = nil
	q.head++
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
		if cap(q.buf) > maxIdleQueue {
			q.buf = nil // a burst's memory is not kept for good
		}
	}
	return msg
}
