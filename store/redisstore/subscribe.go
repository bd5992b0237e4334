package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"

	"github.com/redis/go-redis/v9"
)

// subscription is one inbox subscription.
type subscription struct {
	s    *Store        // whose subs hold it until it stops
	ps   *redis.PubSub // under mu when quit is set
	done chan struct{}
	once sync.Once
	// quit, when set, is closed by stop; its reader may then replace ps
	// (see receiveInval), under mu.
	quit    chan struct{}
	mu      sync.Mutex
	stopped bool // under mu
}

// current returns the subscription's PubSub.
func (sub *subscription) current() *redis.PubSub {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.ps
}

// stopping reports whether stop was called.
func (sub *subscription) stopping() bool {
	sub.mu.Lock()
	defer sub.mu.Unlock()
	return sub.stopped
}

// replace makes ps the subscription's PubSub, unless it was stopped
// (then ps is closed, and replace returns false).
func (sub *subscription) replace(ps *redis.PubSub) bool {
	sub.mu.Lock()
	if sub.stopped {
		sub.mu.Unlock()
		ps.Close()
		return false
	}
	sub.ps = ps
	sub.mu.Unlock()
	return true
}

// Subscribe implements [store.Waker]: it subscribes to a new inbox channel
// and calls fn with the key of each wake-up, and with "" after every
// resubscription (messages may have been lost during the reconnect).
func (s *Store) Subscribe(ctx context.Context, fn func(key string)) (string, func(), error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", nil, err
	}
	id := hex.EncodeToString(b[:])
	ps := s.c.Subscribe(ctx, s.inbox+id)
	if _, err := ps.Receive(ctx); err != nil {
		ps.Close()
		return "", nil, fmt.Errorf("redisstore: subscribe: %w", err)
	}
	sub := &subscription{s: s, ps: ps, done: make(chan struct{})}
	ch := ps.ChannelWithSubscriptions()
	go func() {
		defer close(sub.done)
		for m := range ch {
			switch m := m.(type) {
			case *redis.Message:
				fn(m.Payload)
			case *redis.Subscription:
				if m.Kind == "subscribe" {
					fn("") // resubscribed after a reconnect: check every wait
				}
			}
		}
	}()
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	s.mu.Unlock()
	return id, sub.stop, nil
}

// stop closes the subscription and waits until fn is no longer called. It
// is idempotent.
func (sub *subscription) stop() {
	sub.once.Do(func() {
		sub.mu.Lock()
		sub.stopped = true
		ps := sub.ps
		sub.mu.Unlock()
		if sub.quit != nil {
			close(sub.quit)
		}
		_ = ps.Close()
		<-sub.done
		// Out of the store's list: a Store that outlives the runtimes
		// subscribing to it keeps none of their PubSubs.
		st := sub.s
		st.mu.Lock()
		st.subs = slices.DeleteFunc(st.subs, func(o *subscription) bool { return o == sub })
		st.mu.Unlock()
	})
}

// Close ends every subscription the store made; it does not close the
// client, which belongs to the caller.
func (s *Store) Close() error {
	s.mu.Lock()
	subs := s.subs
	s.subs = nil
	s.mu.Unlock()
	for _, sub := range subs {
		sub.stop()
	}
	if s.slots != nil {
		s.slots.wait()
	}
	return nil
}
