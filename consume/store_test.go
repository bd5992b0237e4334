package consume_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
)

// downStore is a store whose claims fail while down is set.
type downStore struct {
	store.Store
	down atomic.Bool
}

func (s *downStore) Claim(ctx context.Context, key string, req store.ClaimRequest) (store.ClaimResult, error) {
	if s.down.Load() {
		return store.ClaimResult{}, errors.New("connection refused")
	}
	return s.Store.Claim(ctx, key, req)
}

func TestStoreDownRetriesWithBackoff(t *testing.T) {
	ms := memstore.New(memstore.Options{})
	t.Cleanup(func() { ms.Close() })
	st := &downStore{Store: ms}
	st.down.Store(true)
	c := newConsumer(t, idem.Options{Store: st}, consume.Options{MinDelay: 10 * time.Millisecond})
	var e effect
	_, vd := consume.Handle(context.Background(), c, delivery("m", 3), e.fn("", nil))
	check(t, vd, consume.Retry, idem.NoOutcome)
	if !errors.Is(vd.Err, idem.ErrStoreUnavailable) || vd.Delay != 40*time.Millisecond {
		t.Fatalf("%+v, want a store error retried after 40ms", vd)
	}
	e.want(t, 0)
	st.down.Store(false)
	_, vd = consume.Handle(context.Background(), c, delivery("m", 4), e.fn("", nil))
	check(t, vd, consume.Ack, idem.Executed)
	e.want(t, 1)
}
