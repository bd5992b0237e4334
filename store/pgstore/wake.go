package pgstore

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"sync"
	"time"

	"github.com/idemrt/idem/store"
)

// A wake-up is a NOTIFY on the waiting instance's channel (the waiter id
// that Subscribe returns) with the digest of the key as its payload: the
// key itself may be long, binary or sensitive, and a payload must be text
// under 8000 bytes. The subscription learns which key a digest names from
// the claims that register its waiter, before they are sent (a wake-up may
// arrive before the claim's reply), and forgets it when the claim finds the
// key not in progress, or when the wake-up comes.

// digest returns the payload of key's wake-ups: 128 bits of its SHA-256,
// in hex.
func digest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:16])
}

// Waits parked longer than maxPark, with no claim out, are forgotten when
// the subscription holds more than pruneAt of them: their wake-up is lost
// if it ever comes, and the runtime's re-claim timer answers the wait.
const (
	maxPark = 10 * time.Minute
	pruneAt = 4096
)

// subscription is one Subscribe: a channel, and the function that wake-ups
// on it reach.
type subscription struct {
	s  *Store
	id string
	fn func(key string)
	// channel is what the listener LISTENs to for it: id for wake-ups,
	// the table's invalidation channel for an invalidation subscription
	// (inval set, fn nil; see invalidate.go).
	channel string
	inval   func(store.Invalidation)

	callMu  sync.Mutex // held while fn runs, so that stop can wait for it
	stopped bool       // under callMu
	once    sync.Once

	mu    sync.Mutex
	waits map[string]*wait // by digest
}

// wait is a key the subscription's instance claims or waits on.
type wait struct {
	key    string
	claims int       // claims out with this waiter
	parked time.Time // when a claim found it in progress (zero: none did)
}

// Subscribe implements [store.Waker]. It returns once the store's
// listening connection listens on the new channel (it opens that
// connection, from the pool, on the first Subscribe); fn then receives the
// key of each wake-up, and "" after the connection was lost and made again
// (wake-ups sent meanwhile are lost): the runtime then checks every key it
// waits on. fn is called on the listener's goroutine, and must not block.
// stop ends the subscription, and returns once fn is no longer called.
func (s *Store) Subscribe(ctx context.Context, fn func(key string)) (string, func(), error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	id := "idem_" + hex.EncodeToString(b[:])
	sub := &subscription{s: s, id: id, channel: id, fn: fn, waits: map[string]*wait{}}
	if err := sub.start(ctx); err != nil {
		return "", nil, err
	}
	return sub.id, sub.stop, nil
}

// start adds sub to the store's subscriptions and returns once the
// listener listens to its channel (starting the listener for the first
// one). On failure, sub is stopped.
func (sub *subscription) start(ctx context.Context) error {
	s := sub.s
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return errClosed
	}
	s.subs[sub.id] = sub
	l := s.listener
	start := l == nil
	if start {
		l = newListener(s)
		s.listener = l
	}
	s.mu.Unlock()
	done := l.listen(sub.channel)
	if start {
		go l.run()
	}
	select {
	case err := <-done:
		if err != nil {
			sub.stop()
			return err
		}
	case <-ctx.Done():
		sub.stop()
		return ctx.Err()
	}
	return nil
}

// stop ends the subscription; the last one to end closes the listener.
func (sub *subscription) stop() {
	sub.once.Do(func() {
		sub.callMu.Lock()
		sub.stopped = true
		sub.callMu.Unlock()
		s := sub.s
		s.mu.Lock()
		delete(s.subs, sub.id)
		l := s.listener
		last := len(s.subs) == 0
		shared := false // another subscription listens to the channel
		for _, other := range s.subs {
			shared = shared || other.channel == sub.channel
		}
		if last {
			s.listener = nil
		}
		s.mu.Unlock()
		if l == nil {
			return
		}
		if last {
			l.close()
		} else if !shared {
			l.unlisten(sub.channel)
		}
	})
}

// deliver calls fn with key, unless the subscription stopped.
func (sub *subscription) deliver(key string) {
	sub.callMu.Lock()
	defer sub.callMu.Unlock()
	if !sub.stopped {
		sub.fn(key)
	}
}

// deliverInval calls inval with inv, unless the subscription stopped.
func (sub *subscription) deliverInval(inv store.Invalidation) {
	sub.callMu.Lock()
	defer sub.callMu.Unlock()
	if !sub.stopped {
		sub.inval(inv)
	}
}

// expect records a claim of key, about to be sent with this subscription
// as its waiter.
func (sub *subscription) expect(d, key string) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	w := sub.waits[d]
	if w == nil {
		if len(sub.waits) >= pruneAt {
			sub.prune()
		}
		w = &wait{key: key}
		sub.waits[d] = w
	}
	w.claims++
}

// settle records the answer to a claim that expect announced: parked
// when it found the key in progress.
func (sub *subscription) settle(d string, parked bool) {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	w := sub.waits[d]
	if w == nil {
		return
	}
	w.claims--
	if parked {
		w.parked = time.Now()
	}
	if w.claims <= 0 && w.parked.IsZero() {
		delete(sub.waits, d)
	}
}

// wake delivers the wake-up of digest d, if it names a key the
// subscription claims or waits on.
func (sub *subscription) wake(d string) {
	sub.mu.Lock()
	w := sub.waits[d]
	if w == nil {
		sub.mu.Unlock()
		return
	}
	key := w.key
	w.parked = time.Time{}
	if w.claims <= 0 {
		delete(sub.waits, d)
	}
	sub.mu.Unlock()
	sub.deliver(key)
}

// prune forgets the waits parked longer than maxPark with no claim out.
func (sub *subscription) prune() {
	cut := time.Now().Add(-maxPark)
	for d, w := range sub.waits {
		if w.claims <= 0 && w.parked.Before(cut) {
			delete(sub.waits, d)
		}
	}
}

// subscriptionOf returns the store's subscription with channel id, or nil.
func (s *Store) subscriptionOf(id string) *subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.subs[id]
}

// expectWakes tells the subscriptions of this store about the claims in
// calls that name them as waiters.
func (s *Store) expectWakes(calls []*call) {
	for _, c := range calls {
		if c.op.Kind == store.OpClaim && c.op.Claim.Waiter != "" {
			if sub := s.subscriptionOf(c.op.Claim.Waiter); sub != nil && sub.inval == nil {
				c.sub, c.digest = sub, digest(c.op.Key)
				sub.expect(c.digest, c.op.Key)
			}
		}
	}
}

// settleWakes tells them the claims' answers.
func (s *Store) settleWakes(calls []*call) {
	for _, c := range calls {
		if c.sub != nil {
			c.sub.settle(c.digest, c.op.Err == nil && c.op.Result.Status == store.InProgress)
		}
	}
}

// dispatch delivers a notification on channel.
func (s *Store) dispatch(channel, payload string) {
	if channel == s.invalChannel {
		if inv, ok := parseInvalidation(payload); ok {
			for _, sub := range s.subscriptions() {
				if sub.inval != nil {
					sub.deliverInval(inv)
				}
			}
		}
		return
	}
	if sub := s.subscriptionOf(channel); sub != nil && sub.inval == nil {
		sub.wake(payload)
	}
}

// subscriptions returns the store's subscriptions.
func (s *Store) subscriptions() []*subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	subs := make([]*subscription, 0, len(s.subs))
	for _, sub := range s.subs {
		subs = append(subs, sub)
	}
	return subs
}

// wakeAll tells every subscription that wake-ups, and invalidations, may
// have been lost.
func (s *Store) wakeAll() {
	for _, sub := range s.subscriptions() {
		if sub.inval != nil {
			sub.deliverInval(store.Invalidation{Lost: true})
		} else {
			sub.deliver("")
		}
	}
}
