package kafka

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
)

// Consumer is a consumer-group member that runs each record's handler once
// per key. Build it with [New], start it with [Consumer.Run], stop it by
// ending Run's context or with [Consumer.Close]. It owns a kgo.Client and, while
// Run runs, a goroutine per partition it is handling and one that commits.
type Consumer struct {
	o  Options
	cl *kgo.Client

	mu      sync.Mutex
	parts   map[tp]*part
	pending map[string]map[int32]kgo.EpochOffset // done, not yet committed
	running bool
	closed  bool
	stop    context.CancelFunc // ends Run
	done    chan struct{}      // closed when Run returns

	commitMu sync.Mutex // one commit at a time; held by revocations
}

// finalCommitTimeout bounds the commit Run makes when it stops.
const finalCommitTimeout = 10 * time.Second

type tp struct {
	topic     string
	partition int32
}

// part is the goroutine handling one partition's records, one at a time.
type part struct {
	tp     tp
	ctx    context.Context
	cancel context.CancelFunc
	wake   chan struct{} // records queued
	done   chan struct{}
	// Under Consumer.mu:
	queue  []*kgo.Record // fetched, not yet handled, in order
	paused bool          // fetching paused (a full queue, a retry in place)
	fenced bool          // revoked or lost: commits nothing more
}

// pauseAt is the queued records at which a partition's fetching is paused;
// it is resumed once the queue is under half that (and no record is being
// retried in place).
const pauseAt = 1000

// New returns a consumer for opts whose kgo.Client is built with kopts
// (the seed brokers, at least) and the options the consumer needs:
// the group and topics, no autocommit, rebalances blocked while a poll's
// records are handed out, and its own revocation callbacks. kopts must not
// set OnPartitionsRevoked, OnPartitionsLost or autocommit options of their
// own. It returns an error matching idem.ErrInvalidArgument for options
// that are missing or contradict each other, or for a scope of a topic
// (Options.Scope, the group name) that cannot make idem keys (too long, or
// holding a NUL byte), or kgo.NewClient's error.
func New(opts Options, kopts ...kgo.Opt) (*Consumer, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	opts.fillDefaults()
	// A scope that cannot make a key would give every record of its
	// topic up unrun (skipped and committed, without a dead-letter topic).
	for _, t := range opts.Topics {
		if _, err := consume.Key(opts.Scope(t, opts.Group), "k"); err != nil {
			return nil, fmt.Errorf("kafka: Options.Scope of topic %q, group %.40q: %v: %w", t, opts.Group, err, idem.ErrInvalidArgument)
		}
	}
	c := &Consumer{o: opts, parts: map[tp]*part{}, pending: map[string]map[int32]kgo.EpochOffset{}}
	all := append([]kgo.Opt(nil), kopts...)
	all = append(all,
		kgo.ConsumerGroup(opts.Group),
		kgo.ConsumeTopics(opts.Topics...),
		kgo.DisableAutoCommit(),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsRevoked(func(ctx context.Context, _ *kgo.Client, m map[string][]int32) { c.revoke(ctx, m, true) }),
		kgo.OnPartitionsLost(func(ctx context.Context, _ *kgo.Client, m map[string][]int32) { c.revoke(ctx, m, false) }),
	)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		return nil, fmt.Errorf("kafka: %w", err)
	}
	c.cl = cl
	return c, nil
}

// Client returns the consumer's kgo.Client: to produce with it, or to read
// its state. Do not poll, commit or close it.
func (c *Consumer) Client() *kgo.Client { return c.cl }

// Run consumes until ctx ends or Close is called, then waits for the
// partitions' goroutines (a handler in flight goes on under idem and
// stores its result; its record is not committed), commits what is done,
// and returns nil. It returns an error for a consumer already running or
// closed. Call Close after it to leave the group.
func (c *Consumer) Run(ctx context.Context) error {
	if c == nil || c.cl == nil {
		return fmt.Errorf("kafka: Run on a consumer not built by New: %w", idem.ErrInvalidArgument)
	}
	c.mu.Lock()
	if c.running || c.closed {
		c.mu.Unlock()
		return errClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	c.running, c.stop, c.done = true, cancel, make(chan struct{})
	c.mu.Unlock()
	defer close(c.done)
	defer cancel()

	var wg sync.WaitGroup
	wg.Go(func() { c.commitLoop(ctx) })
	c.pollLoop(ctx)
	// The commit loop first: a commit of it that ctx's end interrupted
	// puts its offsets back as pending only for partitions not fenced
	// yet, and they are the final commit's to make.
	wg.Wait()

	// Stop every partition's goroutine, then commit what they finished.
	// They are not fenced until they have stopped: the partitions are
	// still ours, and a record done as Run stops is marked and committed.
	c.mu.Lock()
	parts := make([]*part, 0, len(c.parts))
	for _, p := range c.parts {
		p.cancel()
		parts = append(parts, p)
	}
	c.mu.Unlock()
	for _, p := range parts {
		<-p.done
	}
	c.mu.Lock()
	for k, p := range c.parts {
		p.fenced = true
		delete(c.parts, k)
	}
	c.mu.Unlock()
	cctx, ccancel := context.WithTimeout(context.WithoutCancel(ctx), finalCommitTimeout)
	defer ccancel()
	c.commit(cctx, nil)
	return nil
}

// Close stops Run, waits for it to return, and leaves the group (the
// partitions' last offsets are committed before). It is idempotent.
func (c *Consumer) Close() {
	if c == nil || c.cl == nil {
		return
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.closed = true
	stop, done := c.stop, c.done
	c.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
	c.cl.CloseAllowingRebalance()
}

// pollLoop polls and queues each partition's records for its goroutine.
// A partition is paused while its queue is full or a record of it is
// retried in place. Rebalances wait (BlockRebalanceOnPoll) only while the
// records are handed out.
func (c *Consumer) pollLoop(ctx context.Context) {
	for ctx.Err() == nil {
		fs := c.cl.PollFetches(ctx)
		if fs.IsClientClosed() {
			return
		}
		fs.EachError(func(topic string, partition int32, err error) {
			if !errors.Is(err, context.Canceled) {
				c.o.Logger.Warn("kafka: fetch error", "topic", topic, "partition", partition, "error", err.Error())
			}
		})
		if ctx.Err() == nil {
			// One batch per partition, in the poll's order.
			var order []tp
			batches := map[tp][]*kgo.Record{}
			fs.EachPartition(func(p kgo.FetchTopicPartition) {
				if len(p.Records) == 0 {
					return
				}
				k := tp{p.Topic, p.Partition}
				if _, ok := batches[k]; !ok {
					order = append(order, k)
				}
				batches[k] = append(batches[k], p.Records...)
			})
			for _, k := range order {
				c.dispatch(ctx, k, batches[k])
			}
		}
		c.cl.AllowRebalance()
	}
}

// dispatch queues recs for key's goroutine, pausing the partition when its
// queue is full.
func (c *Consumer) dispatch(ctx context.Context, key tp, recs []*kgo.Record) {
	c.mu.Lock()
	p := c.parts[key]
	if p == nil {
		pctx, cancel := context.WithCancel(ctx)
		p = &part{tp: key, ctx: pctx, cancel: cancel, wake: make(chan struct{}, 1), done: make(chan struct{})}
		c.parts[key] = p
		go c.work(p)
	}
	p.queue = append(p.queue, recs...)
	if len(p.queue) >= pauseAt {
		c.pauseLocked(p)
	}
	c.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// pauseLocked pauses p's fetching. Pausing and resuming happen under
// Consumer.mu, so that p.paused is the client's state.
func (c *Consumer) pauseLocked(p *part) {
	if !p.paused && !p.fenced {
		p.paused = true
		c.cl.PauseFetchPartitions(map[string][]int32{p.tp.topic: {p.tp.partition}})
	}
}

// resumeLocked resumes p's fetching if p's queue has room.
func (c *Consumer) resumeLocked(p *part) {
	if p.paused && !p.fenced && len(p.queue) < pauseAt/2 {
		p.paused = false
		c.cl.ResumeFetchPartitions(map[string][]int32{p.tp.topic: {p.tp.partition}})
	}
}

// work handles p's records, one at a time, until p is canceled.
func (c *Consumer) work(p *part) {
	defer close(p.done)
	for {
		c.mu.Lock()
		if len(p.queue) == 0 {
			c.mu.Unlock()
			select {
			case <-p.ctx.Done():
				return
			case <-p.wake:
			}
			continue
		}
		r := p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
		c.mu.Unlock()
		if !c.handle(p, r) {
			return // canceled: the record stays uncommitted
		}
		c.mark(p, r)
	}
}

// mark records r's offset as done, unless p was revoked meanwhile.
func (c *Consumer) mark(p *part, r *kgo.Record) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p.fenced {
		return
	}
	c.resumeLocked(p)
	m := c.pending[r.Topic]
	if m == nil {
		m = map[int32]kgo.EpochOffset{}
		c.pending[r.Topic] = m
	}
	m[r.Partition] = kgo.EpochOffset{Epoch: r.LeaderEpoch, Offset: r.Offset + 1}
}

// handle runs r until it is done (true: commit it) or p is canceled.
func (c *Consumer) handle(p *part, kr *kgo.Record) bool {
	r := &Record{Record: kr, Attempt: 1}
	topic, keyed := kr.Topic, kr
	if kr.Topic == c.o.RetryTopic && c.o.RetryTopic != "" {
		if t := header(kr, TopicHeader); t != "" {
			topic = t
		}
		if n, err := strconv.Atoi(header(kr, AttemptHeader)); err == nil && n > 0 {
			r.Attempt = n + 1
		}
		keyed = firstRecord(kr, topic)
	}
	r.Scope = c.o.Scope(topic, c.o.Group)
	r.Key = c.o.Key(keyed)
	d := consume.Delivery{Scope: r.Scope, Key: r.Key}
	if c.o.Fingerprint {
		sum := sha256.Sum256(kr.Value)
		d.Fingerprint = sum[:]
	}
	for tries := 1; ; {
		d.Attempt = r.Attempt
		_, v := consume.HandleWith(p.ctx, c.o.Consumer, d, c.o.Run, func(ctx context.Context) (struct{}, error) {
			return struct{}{}, c.o.Handler(ctx, r)
		})
		r.IdemKey = v.Key
		if c.o.OnVerdict != nil {
			c.o.OnVerdict(r, v)
		}
		switch v.Decision {
		case consume.Ack:
			return true
		case consume.Term:
			return c.giveUp(p, r, v.Err)
		}
		if p.ctx.Err() != nil {
			return false
		}
		c.mu.Lock()
		c.pauseLocked(p) // nothing more is fetched while the record waits
		c.mu.Unlock()
		if v.Outcome != idem.NoOutcome { // the handler failed: it counts
			if c.o.InPlaceAttempts > 0 && tries >= c.o.InPlaceAttempts {
				if c.o.RetryTopic != "" {
					return c.forward(p, c.o.RetryTopic, r, v.Err)
				}
				return c.giveUp(p, r, v.Err)
			}
			tries++
		}
		r.Attempt++
		if !sleep(p.ctx, v.Delay) {
			return false
		}
	}
}

// firstRecord returns, for the key function, a shallow copy of kr (a
// record of the retry topic) that names the first record: its topic, and
// its partition and offset from the Idem-* headers. A key made of them
// is then the first record's, not that of whatever record of the first
// topic sits at the copy's own partition and offset (whose stored result
// the copy would replay without running).
func firstRecord(kr *kgo.Record, topic string) *kgo.Record {
	first := *kr
	first.Topic = topic
	if p, err := strconv.ParseInt(header(kr, PartitionHeader), 10, 32); err == nil {
		first.Partition = int32(p)
	}
	if o, err := strconv.ParseInt(header(kr, OffsetHeader), 10, 64); err == nil {
		first.Offset = o
	}
	return &first
}

// giveUp sends r to the dead-letter topic, if any; true when r may be
// committed.
func (c *Consumer) giveUp(p *part, r *Record, err error) bool {
	if c.o.DeadLetterTopic == "" {
		c.o.Logger.Warn("kafka: a record is given up and skipped (no DeadLetterTopic)",
			"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "key", r.Key, "reason", errText(err))
		return true
	}
	return c.forward(p, c.o.DeadLetterTopic, r, err)
}

// forward produces a copy of r to topic, retrying with the backoff until
// the brokers acknowledge it (true) or p is canceled (false). It does not
// wait for a produce in flight once p is canceled: franz-go's idempotent
// producer cannot fail a record whose request was sent, so a broker that
// does not answer would hold a revocation, or Run's end, until it does.
// The copy may then still be written; the record stays uncommitted and
// its next delivery copies it again.
func (c *Consumer) forward(p *part, topic string, r *Record, err error) bool {
	for n := 1; ; n++ {
		res := make(chan error, 1) // the promise never blocks, awaited or not
		c.cl.Produce(p.ctx, copyFor(topic, r, err), func(_ *kgo.Record, err error) { res <- err })
		var perr error
		select {
		case perr = <-res:
		case <-p.ctx.Done():
			return false
		}
		if perr == nil {
			return true
		}
		if p.ctx.Err() != nil {
			return false
		}
		c.mu.Lock()
		c.pauseLocked(p) // the partition waits for the copy
		c.mu.Unlock()
		c.o.Logger.Warn("kafka: producing a record's copy failed; retrying",
			"topic", topic, "from", r.Topic, "partition", r.Partition, "offset", r.Offset, "error", perr.Error())
		if !sleep(p.ctx, min(time.Duration(n)*100*time.Millisecond, 5*time.Second)) {
			return false
		}
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// sleep waits d or until ctx ends (false).
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// commitLoop commits what is done every CommitInterval until ctx ends.
func (c *Consumer) commitLoop(ctx context.Context) {
	t := time.NewTicker(c.o.CommitInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			c.commit(ctx, nil)
		}
	}
}

// commit commits the pending offsets: of the partitions only, when only
// is not nil. A failed commit leaves them pending, unless they were
// revoked meanwhile.
func (c *Consumer) commit(ctx context.Context, only map[string][]int32) {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	c.commitLocked(ctx, only)
}

func (c *Consumer) commitLocked(ctx context.Context, only map[string][]int32) {
	c.mu.Lock()
	var out map[string]map[int32]kgo.EpochOffset
	if only == nil {
		out, c.pending = c.pending, map[string]map[int32]kgo.EpochOffset{}
	} else {
		out = map[string]map[int32]kgo.EpochOffset{}
		for t, ps := range only {
			for _, p := range ps {
				if eo, ok := c.pending[t][p]; ok {
					if out[t] == nil {
						out[t] = map[int32]kgo.EpochOffset{}
					}
					out[t][p] = eo
					delete(c.pending[t], p)
				}
			}
		}
	}
	c.mu.Unlock()
	if len(out) == 0 {
		return
	}
	var failed error
	c.cl.CommitOffsetsSync(ctx, out, func(_ *kgo.Client, _ *kmsg.OffsetCommitRequest, resp *kmsg.OffsetCommitResponse, err error) {
		if err != nil {
			failed = err
			return
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if p.ErrorCode != 0 && failed == nil {
					failed = fmt.Errorf("topic %s partition %d: error code %d", t.Topic, p.Partition, p.ErrorCode)
				}
			}
		}
	})
	if failed == nil {
		return
	}
	c.o.Logger.Warn("kafka: committing offsets failed; the records will be replayed if redelivered", "error", failed.Error())
	if only != nil {
		return // revoked: those are no longer ours
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for t, ps := range out {
		for p, eo := range ps {
			if _, newer := c.pending[t][p]; newer || c.fencedLocked(tp{t, p}) {
				continue
			}
			if c.pending[t] == nil {
				c.pending[t] = map[int32]kgo.EpochOffset{}
			}
			c.pending[t][p] = eo
		}
	}
}

// fencedLocked reports whether key's partition is no longer handled here.
func (c *Consumer) fencedLocked(key tp) bool {
	p := c.parts[key]
	return p == nil || p.fenced
}

// revoke is the OnPartitionsRevoked (commit true) and OnPartitionsLost
// (commit false) callback: it keeps the partitions' goroutines from
// marking anything more, stops them (a handler in flight goes on under
// idem; its record is not committed here, and the next owner replays or
// joins it), waits for them, and commits (or, lost, drops) what they
// finished before.
func (c *Consumer) revoke(ctx context.Context, m map[string][]int32, commit bool) {
	// A periodic commit in flight ends first: if it fails, its offsets go
	// back to pending while the partitions are not fenced yet, and are
	// committed below (they were marked before the revocation). Fenced
	// first, they would be dropped as no longer ours.
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	var stopped []*part
	c.mu.Lock()
	for t, ps := range m {
		for _, p := range ps {
			if w := c.parts[tp{t, p}]; w != nil {
				w.fenced = true
				w.cancel()
				stopped = append(stopped, w)
				delete(c.parts, tp{t, p})
			}
		}
	}
	c.mu.Unlock()
	for _, w := range stopped {
		<-w.done
	}
	if commit {
		c.commitLocked(ctx, m)
	} else {
		c.mu.Lock()
		for t, ps := range m {
			for _, p := range ps {
				delete(c.pending[t], p)
			}
		}
		c.mu.Unlock()
	}
	c.cl.ResumeFetchPartitions(m)
}
