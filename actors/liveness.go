package actors

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/idemrt/idem/clock"
	"github.com/idemrt/idem/store"
)

// Early takeover. With a store that keeps liveness records
// (store.Liveness), a set beats every LiveEvery: its instance is live for
// LiveTTL from each beat. A shard that re-claims a key another instance
// holds asks the monitor whether the holder's instance is dead; the
// monitor checks, on its next beat, each instance it was asked about, and
// says dead once the instance's record has ended and this instance has
// itself beaten without a gap for LiveGrace. The shard's next claim then
// names the holder it saw (ClaimRequest.Dead), and the store takes the key
// over if that owner still holds it.
//
// The grace is what keeps a store outage from handing over live owners'
// keys: while the store cannot be reached, every instance's record ends,
// and the first instance to reach it again must give the others time to
// beat again. A beat that fails, or one that comes more than LiveTTL after
// the last good one (a paused server that answers late), starts the grace
// over, and until it has passed no instance is called dead.

// The defaults of the liveness settings (Config.LiveEvery, LiveTTL,
// LiveGrace). With a store that wakes waiters, a SIGKILLed instance's keys
// are taken over about LiveTTL + 3 × LiveEvery after its last beat (a
// record must stay ended across two beats: see check).
const (
	DefaultLiveEvery = time.Second
	DefaultLiveTTL   = 3 * time.Second
	DefaultLiveGrace = 5 * time.Second
)

// maxPeers bounds the instances the monitor checks: past it, a holder of a
// new instance is never found dead (its lease still ends).
const maxPeers = 1024

// peerIdle is how long an instance nobody asked about stays checked.
const peerIdle = 10 * time.Second

// liveMonitor beats for its instance and checks the instances the shards
// wait on. Its tick runs on a timer, one at a time. It keeps real time
// whatever the runtime's clock: a fake clock's timers are the tests' to
// count and step, and a beat is I/O in real time. The store judges its
// records by its own clock.
type liveMonitor struct {
	st       store.Liveness
	clock    clock.Clock
	logger   *slog.Logger
	instance string
	every    time.Duration
	ttl      time.Duration
	grace    time.Duration
	onDead   func() // an instance was found dead: re-claim the waiting keys now

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	stopped bool
	timer   clock.Timer
	okSince time.Time // start of the current run of good beats (zero: none)
	lastOK  time.Time // end of the last good beat
	failing bool      // the last beat failed (for the log)
	peers   map[string]*peer
}

type peer struct {
	dead  bool
	asked time.Time
	// notLiveSince is when the peer's record was first found ended in the
	// current run of such answers (zero: the last answer was live, or an
	// error); lastErr when reading it last failed.
	notLiveSince, lastErr time.Time
}

func newLiveMonitor(cfg *Config, st store.Liveness, instance string, onDead func()) *liveMonitor {
	l := &liveMonitor{
		st: st, clock: clock.Real(), logger: cfg.Logger, instance: instance, onDead: onDead,
		every: cfg.LiveEvery, ttl: cfg.LiveTTL, grace: cfg.LiveGrace,
		peers: make(map[string]*peer),
	}
	if l.every <= 0 {
		l.every = DefaultLiveEvery
	}
	if l.ttl <= 0 {
		l.ttl = DefaultLiveTTL
	}
	if l.grace <= 0 {
		l.grace = DefaultLiveGrace
	}
	if l.ttl <= l.every {
		l.ttl = 2 * l.every // the runtime's options refuse it; the actors' default it
	}
	l.ctx, l.cancel = context.WithCancel(context.Background())
	return l
}

// start beats once, so that this instance is live before it claims
// anything, and arms the next beat.
func (l *liveMonitor) start() {
	l.beat()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.arm()
}

// arm schedules the next tick; l.mu held.
func (l *liveMonitor) arm() {
	if l.stopped {
		return
	}
	l.wg.Add(1)
	l.timer = l.clock.AfterFunc(l.every, func() {
		defer l.wg.Done()
		l.tick()
	})
}

// stop ends the beats and waits for a tick under way. The instance's
// record ends on its own, LiveTTL later.
func (l *liveMonitor) stop() {
	l.mu.Lock()
	l.stopped = true
	if l.timer != nil && l.timer.Stop() {
		l.wg.Done()
	}
	l.mu.Unlock()
	l.cancel()
	l.wg.Wait()
}

func (l *liveMonitor) tick() {
	l.beat()
	l.check()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.arm()
}

// beat refreshes this instance's record. A beat may take up to LiveTTL -
// LiveEvery (a loaded store, a pool whose connections are all busy): the
// record of the beat before still holds it live until then; past that,
// the instance looks dead anyway.
func (l *liveMonitor) beat() {
	ctx, cancel := context.WithTimeout(l.ctx, l.ttl-l.every)
	defer cancel()
	err := l.st.Beat(ctx, l.instance, l.ttl)
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.okSince = time.Time{}
		for _, p := range l.peers {
			p.dead, p.notLiveSince = false, time.Time{}
		}
		if !l.failing && l.ctx.Err() == nil {
			l.failing = true
			l.logger.Warn("idem: liveness beat failed; no other instance is taken for dead until beats succeed for the grace period",
				"error", err, "grace", l.grace)
		}
		return
	}
	if l.failing {
		l.failing = false
		l.logger.Info("idem: liveness beats succeed again")
	}
	if l.okSince.IsZero() || now.Sub(l.lastOK) > l.ttl {
		l.okSince = now
	}
	l.lastOK = now
}

// check asks the store about each instance a shard waited on lately.
func (l *liveMonitor) check() {
	now := l.clock.Now()
	l.mu.Lock()
	sure := !l.okSince.IsZero() && now.Sub(l.okSince) >= l.grace
	var ask []string
	for id, p := range l.peers {
		if now.Sub(p.asked) > peerIdle {
			delete(l.peers, id)
			continue
		}
		if sure {
			ask = append(ask, id)
		} else {
			p.dead, p.notLiveSince = false, time.Time{}
		}
	}
	l.mu.Unlock()
	found := false
	for _, id := range ask {
		ctx, cancel := context.WithTimeout(l.ctx, l.ttl-l.every)
		live, err := l.st.Live(ctx, id)
		cancel()
		now := l.clock.Now()
		l.mu.Lock()
		if p := l.peers[id]; p != nil {
			dead := false
			switch {
			case err != nil:
				// The peer's record could not be read: its part of the
				// store (a cluster master failing over) may be what kept
				// it from beating.
				p.lastErr, p.notLiveSince = now, time.Time{}
			case live:
				p.notLiveSince = time.Time{}
			default:
				if p.notLiveSince.IsZero() {
					p.notLiveSince = now
				}
				// Dead once its record has stayed ended across two of its
				// beats, and its record was readable for a grace period:
				// a record lost with a failed master (or one that master
				// kept from being written) is written again by a live peer
				// within a beat of the store's return.
				dead = now.Sub(p.notLiveSince) >= 2*l.every && now.Sub(p.lastErr) >= l.grace
			}
			found = found || dead && !p.dead
			p.dead = dead
		}
		l.mu.Unlock()
	}
	if found && l.onDead != nil {
		l.onDead()
	}
}

// dead reports whether owner, a claim owner another instance holds a key
// under, belongs to an instance found dead. An owner the monitor has not
// heard of is checked from the next beat on.
func (l *liveMonitor) dead(owner string) bool {
	id, ok := instanceOf(owner)
	if !ok || id == l.instance {
		return false
	}
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	p := l.peers[id]
	if p == nil {
		if len(l.peers) >= maxPeers {
			return false
		}
		p = &peer{}
		l.peers[id] = p
	}
	p.asked = now
	return p.dead
}

// instanceOf returns the instance of an owner the runtime made (see
// ownerIDs): 16 hex digits, "-", a sequence number.
func instanceOf(owner string) (string, bool) {
	id, rest, ok := strings.Cut(owner, "-")
	if !ok || len(id) != 16 || rest == "" {
		return "", false
	}
	for i := range len(id) {
		if c := id[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return "", false
		}
	}
	return id, true
}
