package idem_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/idemtest"
	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/memstore"
	"github.com/idemrt/idem/store/redisstore"
)

// A 2 MB result on a Redis whose proto-max-bulk-len is 1 MB: the function
// runs once, the owner and its five waiters get a permanent error matching
// ErrResultTooLarge, which is stored (another instance replays it), and
// the other keys finishing at the same moment are stored and answered.
// Once with the store's limit known to the runtime (the result never
// leaves the process), once with a store that hides it (Redis's store
// refuses it unsent, and the shard stores the error in its place instead
// of releasing the key for a rerun).
func TestResultTooLargeForRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{Args: []string{"--proto-max-bulk-len", "1mb"}})
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	for _, hide := range []bool{false, true} {
		t.Run(fmt.Sprint("hidden limit ", hide), func(t *testing.T) {
			rs, err := redisstore.New(bg, c, redisstore.Options{KeyPrefix: fmt.Sprintf("big%v:", hide)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { rs.Close() })
			var st store.Store = rs
			if hide {
				st = plainStore{rs} // (poll_test.go): no SizeLimited
			}
			rt := idemtest.Runtime(t, idem.Options{Store: st, Shards: 1})
			want := 1<<20 - store.RecordOverhead // the server's limit, less the store's overhead
			if hide {
				want = 64 << 20 // the default: the runtime does not know the limit
			}
			if got := rt.MaxResultBytes(); got != want {
				t.Fatalf("MaxResultBytes = %d, want %d", got, want)
			}
			ctx := context.Background()
			g := idemtest.NewGate()
			owner := idemtest.GoDo(ctx, rt, "big", g.Fn(strings.Repeat("x", 2<<20), nil))
			<-g.Started
			var waiting []<-chan idemtest.Result
			for range 5 {
				waiting = append(waiting, idemtest.GoDo(ctx, rt, "big", idemtest.MustNotRun(t)))
			}
			others := idemtest.NewGate()
			var small []<-chan idemtest.Result
			for i := range 20 {
				small = append(small, idemtest.GoDo(ctx, rt, fmt.Sprint("small-", i), others.Fn("s", nil)))
				<-others.Started
			}
			idemtest.Eventually(t, "five waiters", func() bool { return rt.Stats().Waiters == 5 })
			close(others.Open)
			close(g.Open)
			check := func(who string, err error) {
				t.Helper()
				var ce *idem.CodecError
				if !errors.Is(err, idem.ErrResultTooLarge) || !idem.IsPermanent(err) || !errors.As(err, &ce) {
					t.Fatalf("%s: %v, want a permanent *CodecError matching ErrResultTooLarge", who, err)
				}
			}
			check("owner", idemtest.Recv(t, owner).Err)
			for _, ch := range waiting {
				check("waiter", idemtest.Recv(t, ch).Err)
			}
			for _, ch := range small {
				if r := idemtest.Recv(t, ch); r.Err != nil || r.V != "s" {
					t.Fatalf("another key: %+v", r)
				}
			}
			if g.Runs() != 1 {
				t.Fatalf("fn ran %d times", g.Runs())
			}
			other := idemtest.Runtime(t, idem.Options{Store: rs, DisableCache: true})
			_, err = idem.Do(ctx, other, "big", idemtest.MustNotRun(t))
			check("another instance's replay", err)
			if n := rs.Stats().TooLarge; hide != (n > 0) {
				t.Fatalf("the store refused %d operations for their size; hidden limit %v", n, hide)
			}
		})
	}
}

// A call whose fingerprint is over what the store takes is refused as an
// invalid argument, not reported as an outage to retry, and fn does not run.
func TestFingerprintTooLargeForRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{Args: []string{"--proto-max-bulk-len", "1mb"}})
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	rs, err := redisstore.New(bg, c, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	rt := idemtest.Runtime(t, idem.Options{Store: rs})
	_, err = idem.Do(bg, rt, "k", idemtest.MustNotRun(t), idem.WithFingerprint(make([]byte, 2<<20)))
	if !errors.Is(err, idem.ErrInvalidArgument) || !errors.Is(err, store.ErrTooLarge) || errors.Is(err, idem.ErrStoreUnavailable) {
		t.Fatalf("a 2 MB fingerprint: %v, want ErrInvalidArgument and store.ErrTooLarge", err)
	}
	if v, err := idem.Do(bg, rt, "k", idemtest.Value("v")); err != nil || v != "v" {
		t.Fatalf("the key afterwards: %q, %v", v, err)
	}
}

// pickyStore is the in-memory store (whose owners complete their keys
// themselves) refusing values over 1000 bytes for their size, without
// saying its limit.
type pickyStore struct{ *memstore.Store }

func (p pickyStore) Complete(ctx context.Context, key string, tok store.Token, rec store.Record, ttl time.Duration) (store.Record, error) {
	if len(rec.Value) > 1000 {
		return store.Record{}, fmt.Errorf("picky: %w", store.ErrTooLarge)
	}
	return p.Store.Complete(ctx, key, tok, rec, ttl)
}

// With a store whose owners complete their keys themselves, a result the
// store refuses for its size is the same stored permanent error for the
// owner and its waiters, and fn ran once.
func TestResultTooLargeOwnerCompletes(t *testing.T) {
	st := pickyStore{memstore.New(memstore.Options{})}
	rt := idemtest.Runtime(t, idem.Options{Store: st})
	g := idemtest.NewGate()
	owner := idemtest.GoDo(bg, rt, "big", g.Fn(strings.Repeat("x", 2000), nil))
	<-g.Started
	waiter := idemtest.GoDo(bg, rt, "big", idemtest.MustNotRun(t))
	idemtest.Eventually(t, "a waiter", func() bool { return rt.Stats().Waiters == 1 })
	close(g.Open)
	for _, ch := range []<-chan idemtest.Result{owner, waiter} {
		if err := idemtest.Recv(t, ch).Err; !errors.Is(err, idem.ErrResultTooLarge) || !idem.IsPermanent(err) {
			t.Fatalf("%v, want a permanent ErrResultTooLarge", err)
		}
	}
	if _, err := idem.Do(bg, rt, "big", idemtest.MustNotRun(t)); !errors.Is(err, idem.ErrResultTooLarge) {
		t.Fatalf("replay: %v", err)
	}
	if g.Runs() != 1 {
		t.Fatalf("fn ran %d times", g.Runs())
	}
}

// A fingerprint that fits in a claim but leaves no room for a record to
// hold it with a result, not even the small permanent error stored in
// place of one too large, must not let the function run: its result could
// never be stored, the key would be released, and every retry would run
// the function again.
func TestFingerprintLeavingNoRoomForARecord(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{Args: []string{"--proto-max-bulk-len", "1mb"}})
	c := redis.NewClient(&redis.Options{Addr: srv.Addr})
	t.Cleanup(func() { c.Close() })
	rs, err := redisstore.New(bg, c, redisstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rs.Close() })
	rt := idemtest.Runtime(t, idem.Options{Store: rs})
	fp := make([]byte, 1<<20-100) // a claim holds it; with a kilobyte more, no record does
	runs := 0
	fn := func(context.Context) (string, error) { runs++; return strings.Repeat("v", 1000), nil }
	var errs []error
	for range 3 {
		_, err := idem.Do(bg, rt, "k", fn, idem.WithFingerprint(fp))
		errs = append(errs, err)
	}
	if runs > 1 {
		t.Fatalf("the function ran %d times (errors %v)", runs, errs)
	}
	if v, err := idem.Do(bg, rt, "k2", idemtest.Value("v"), idem.WithFingerprint(fp[:1<<20-4<<10])); err != nil || v != "v" {
		t.Fatalf("a fingerprint leaving room for a record: %q, %v", v, err)
	}
}
