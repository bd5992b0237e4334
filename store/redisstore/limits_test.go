package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/redisstore"
)

// claimed claims keys for owner "o" and returns their tokens.
func claimed(t *testing.T, s *redisstore.Store, keys ...string) map[string]store.Token {
	t.Helper()
	toks := map[string]store.Token{}
	for _, k := range keys {
		r, err := s.Claim(bg, k, store.ClaimRequest{Owner: "o-" + k, Lease: time.Minute, TTL: time.Hour})
		if err != nil || r.Status != store.Claimed {
			t.Fatalf("claim %s: %+v, %v", k, r, err)
		}
		toks[k] = r.Token
	}
	return toks
}

// The store reads the server's proto-max-bulk-len and refuses, unsent, an
// operation over it with store.ErrTooLarge: the other operations of its
// batch are served (sent, a 2 MB argument made Redis close the connection
// and failed them), and the refused key is as it was.
func TestServerSizeLimit(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{Args: []string{"--proto-max-bulk-len", "1mb"}})
	c := newClient(t, srv)
	s := newStore(t, c)
	if got := s.MaxRecordBytes(); got != 1<<20 {
		t.Fatalf("MaxRecordBytes = %d, want the server's 1 MiB", got)
	}
	toks := claimed(t, s, "big", "a", "b")
	ops := []*store.Op{
		{Kind: store.OpComplete, Key: "a", Token: toks["a"], Record: store.Record{Value: []byte("va")}, TTL: time.Hour},
		{Kind: store.OpComplete, Key: "big", Token: toks["big"], Record: store.Record{Value: make([]byte, 2<<20)}, TTL: time.Hour},
		{Kind: store.OpClaim, Key: "c", Claim: store.ClaimRequest{Owner: "o-c", Lease: time.Minute, TTL: time.Hour}},
		{Kind: store.OpComplete, Key: "b", Token: toks["b"], Record: store.Record{Value: []byte("vb")}, TTL: time.Hour},
	}
	s.Batch(bg, ops)
	if err := ops[1].Err; !errors.Is(err, store.ErrTooLarge) || store.Retryable(err) {
		t.Fatalf("2 MB Complete: %v, want a final store.ErrTooLarge", err)
	}
	for _, i := range []int{0, 2, 3} {
		if ops[i].Err != nil {
			t.Fatalf("%s %s in the same batch: %v", ops[i].Kind, ops[i].Key, ops[i].Err)
		}
	}
	if r, err := s.Claim(bg, "big", store.ClaimRequest{Owner: "other", Lease: time.Minute, TTL: time.Hour}); err != nil || r.Status != store.InProgress {
		t.Fatalf("the refused key: %+v, %v; want it still in progress", r, err)
	}
	// A fingerprint is an argument too.
	_, err := s.Claim(bg, "fp", store.ClaimRequest{Owner: "o", Lease: time.Minute, TTL: time.Hour, Fingerprint: make([]byte, 1<<20+1)})
	if !errors.Is(err, store.ErrTooLarge) {
		t.Fatalf("a claim with a 1 MiB fingerprint: %v", err)
	}
	if st := s.Stats(); st.TooLarge != 2 {
		t.Fatalf("Stats.TooLarge = %d, want 2", st.TooLarge)
	}
	if v, err := s.Get(bg, "a"); err != nil || string(v.Value) != "va" {
		t.Fatalf("a: %q, %v", v.Value, err)
	}
}

// Where CONFIG is refused, the store assumes Redis's default limit;
// Options.MaxRecordBytes sets it by hand; bad values are refused.
func TestMaxRecordBytesOptions(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{Args: []string{"--rename-command", "CONFIG", ""}})
	c := newClient(t, srv)
	if got := newStore(t, c).MaxRecordBytes(); got != redisstore.DefaultMaxRecordBytes {
		t.Fatalf("CONFIG refused: MaxRecordBytes = %d, want %d", got, redisstore.DefaultMaxRecordBytes)
	}
	s, err := redisstore.New(bg, c, redisstore.Options{KeyPrefix: "byhand:", MaxRecordBytes: 3 << 20})
	if err != nil || s.MaxRecordBytes() != 3<<20 {
		t.Fatalf("by hand: %v", err)
	}
	s.Close()
	for _, o := range []redisstore.Options{{MaxRecordBytes: 1000}, {MaxRecordBytes: -1}, {MaxBatchBytes: -1}, {Timeout: 1<<63 - 1}} {
		if _, err := redisstore.New(bg, c, o); !errors.Is(err, store.ErrInvalidArgument) {
			t.Errorf("%+v: %v, want ErrInvalidArgument", o, err)
		}
	}
}

// On a cluster, the limit is the least of the masters'.
func TestClusterSizeLimit(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	addrs := cl.Addrs()
	if _, err := redistest.Command(addrs[1], "CONFIG", "SET", "proto-max-bulk-len", "2mb"); err != nil {
		t.Fatal(err)
	}
	s := newStore(t, newClusterClient(t, cl))
	if got := s.MaxRecordBytes(); got != 2<<20 {
		t.Fatalf("MaxRecordBytes = %d, want the least master's 2 MiB", got)
	}
}

// pipeSizes records the bytes of the arguments of every pipeline a client
// sends.
type pipeSizes struct {
	mu    sync.Mutex
	sizes [][2]int // bytes, commands
}

func (*pipeSizes) DialHook(next redis.DialHook) redis.DialHook { return next }
func (*pipeSizes) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return next
}

func (p *pipeSizes) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		n := 0
		for _, c := range cmds {
			for _, a := range c.Args() {
				switch a := a.(type) {
				case string:
					n += len(a)
				case []byte:
					n += len(a)
				}
			}
		}
		p.mu.Lock()
		p.sizes = append(p.sizes, [2]int{n, len(cmds)})
		p.mu.Unlock()
		return next(ctx, cmds)
	}
}

// A batch over MaxBatchBytes goes out as several pipelines, each under it,
// and an operation over it goes alone; every operation is served.
func TestMaxBatchBytes(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	sizes := &pipeSizes{}
	c.AddHook(sizes)
	const cap = 64 << 10
	s, err := redisstore.New(bg, c, redisstore.Options{KeyPrefix: "cap:", MaxBatchBytes: cap})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var keys []string
	for i := range 20 {
		keys = append(keys, fmt.Sprint("k", i))
	}
	toks := claimed(t, s, append(keys, "lone")...)
	var ops []*store.Op
	for i, k := range keys {
		ops = append(ops, &store.Op{Kind: store.OpComplete, Key: k, Token: toks[k], Record: store.Record{Value: []byte(strings.Repeat("v", 10<<10))}, TTL: time.Hour})
		if i == 7 {
			ops = append(ops, &store.Op{Kind: store.OpComplete, Key: "lone", Token: toks["lone"], Record: store.Record{Value: make([]byte, 100<<10)}, TTL: time.Hour})
		}
	}
	sizes.mu.Lock()
	sizes.sizes = nil
	sizes.mu.Unlock()
	s.Batch(bg, ops)
	for _, op := range ops {
		if op.Err != nil {
			t.Fatalf("%s: %v", op.Key, op.Err)
		}
	}
	sizes.mu.Lock()
	sent := sizes.sizes
	sizes.mu.Unlock()
	if len(sent) < 5 {
		t.Fatalf("%d pipelines (%v), want the 310 KiB batch split", len(sent), sent)
	}
	alone := 0
	for _, p := range sent {
		switch {
		case p[0] > cap && p[1] == 1:
			alone++
		case p[0] > cap:
			t.Fatalf("a pipeline of %d commands sent %d bytes, over the %d cap", p[1], p[0], cap)
		}
	}
	if alone != 1 {
		t.Fatalf("%d lone pipelines over the cap, want 1 (%v)", alone, sent)
	}
	if st := s.Stats(); st.SplitBatches != 1 || st.LoneOps != 1 {
		t.Fatalf("Stats %+v, want one split batch and one lone op", st)
	}
	for _, k := range append(keys, "lone") {
		if _, err := s.Get(bg, k); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
	}
}
