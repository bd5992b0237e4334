package redisstore_test

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/redisstore"
)

// lossyClient gives up on a reply after 100ms and keeps go-redis's default
// MaxRetries (3): a command whose reply is lost is re-sent, unless the
// store tells go-redis not to.
func lossyClient(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 100 * time.Millisecond})
	t.Cleanup(func() { c.Close() })
	return c
}

func claimReq(owner string) store.ClaimRequest {
	return store.ClaimRequest{Owner: owner, Lease: time.Minute, TTL: time.Hour}
}

// pausedRace pauses srv, runs first on one goroutine and, 50ms later,
// second on another, and resumes srv at 140ms: first's reply is lost (its
// client gives up at 100ms), and the server runs both calls when it
// resumes, first's usually before second's. go-redis used to re-send first
// at about 110ms, and that copy mostly ran after second.
func pausedRace(t *testing.T, srv *redistest.Server, first func() error, second func()) error {
	t.Helper()
	srv.Pause()
	paused := true
	defer func() {
		if paused {
			srv.Resume()
		}
	}()
	done := make(chan error, 1)
	go func() { done <- first() }()
	time.Sleep(50 * time.Millisecond)
	secondDone := make(chan struct{})
	go func() {
		defer close(secondDone)
		second()
	}()
	time.Sleep(90 * time.Millisecond)
	srv.Resume()
	paused = false
	<-secondDone
	return <-done
}

// A Release whose reply is lost is not run a second time: the first run
// released the key, another client claimed it (fence 2), and a second run
// would have found the new claim and answered ErrLeaseLost, which says the
// Release did not release the key. The Release's answer is now the lost reply's
// error (an unknown outcome), never ErrLeaseLost.
func TestLostReleaseReplyIsNotAnsweredByARerun(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.Options{})
	prefix := "lost-release:"
	sa := newStoreWithPrefix(t, lossyClient(t, srv.Addr), prefix)
	sb := newStoreWithPrefix(t, newClient(t, srv), prefix)
	a, err := sa.Claim(bg, "k", claimReq("a"))
	if err != nil || a.Status != store.Claimed {
		t.Fatalf("claim a: %v %v", a.Status, err)
	}
	var b store.ClaimResult
	var bErr error
	releaseErr := pausedRace(t, srv,
		func() error { return sa.Release(bg, "k", a.Token) },
		func() { b, bErr = sb.Claim(bg, "k", claimReq("b")) })
	if bErr != nil {
		t.Fatalf("claim b: %v", bErr)
	}
	t.Logf("release: %v; claim b: %v fence %d", releaseErr, b.Status, b.Token.Fence)
	if errors.Is(releaseErr, store.ErrLeaseLost) {
		t.Errorf("Release answered ErrLeaseLost, but it released the key: claim b got %v with fence %d", b.Status, b.Token.Fence)
	}
}

// servers is a deployment that can be paused as a whole.
type servers []*redistest.Server

func (ss servers) pause() {
	for _, s := range ss {
		s.Pause()
	}
}

func (ss servers) resume() {
	for _, s := range ss {
		s.Resume()
	}
}

// scriptRuns returns how many operations the servers have run: EVALSHA
// calls (every operation of the store is a script, see scripts.go).
func (ss servers) scriptRuns(t testing.TB) int {
	t.Helper()
	n := 0
	for _, s := range ss {
		info, err := redistest.Command(s.Addr, "INFO", "commandstats")
		if err != nil {
			t.Fatal(err)
		}
		for line := range strings.SplitSeq(info, "\n") {
			line = strings.TrimSpace(line)
			if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
				calls, _, _ := strings.Cut(rest, ",")
				c, err := strconv.Atoi(calls)
				if err != nil {
					t.Fatalf("commandstats line %q: %v", line, err)
				}
				n += c
			}
		}
	}
	return n
}

// settledRuns waits until the servers have run at least least EVALSHA
// calls and no more arrive for 100ms, and returns their number.
func (ss servers) settledRuns(t testing.TB, least int) int {
	t.Helper()
	n := ss.scriptRuns(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		time.Sleep(100 * time.Millisecond)
		m := ss.scriptRuns(t)
		if m == n && m >= least {
			return n
		}
		if time.Now().After(deadline) {
			t.Fatalf("EVALSHA calls not settled after 10s: %d, then %d", n, m)
		}
		n = m
	}
}

// lossyDeployments runs f on a single node and on a 3-master cluster. Its
// client function returns a new client of the deployment that gives up on
// a reply after rt and keeps go-redis's default retries.
//
// A client's first pipeline to a node opens a connection, whose handshake
// waits longer than a reply: the tests send a script call to the key's
// node before they pause the servers.
func lossyDeployments(t *testing.T, f func(t *testing.T, ss servers, rt time.Duration, client func(testing.TB) redis.UniversalClient)) {
	t.Run("single", func(t *testing.T) {
		t.Parallel()
		srv := redistest.Start(t, redistest.Options{})
		f(t, servers{srv}, 100*time.Millisecond, func(t testing.TB) redis.UniversalClient { return lossyClient(t, srv.Addr) })
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		cl := redistest.StartCluster(t, 3)
		const rt = 250 * time.Millisecond // loading the scripts on 3 nodes must fit
		f(t, servers(cl.Nodes), rt, func(t testing.TB) redis.UniversalClient {
			c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ReadTimeout: rt})
			t.Cleanup(func() { c.Close() })
			return c
		})
	})
}

// A Complete, a Release or a Forget whose reply is lost runs once: go-redis
// does not send it again (it used to, up to MaxRetries times), and the
// store does not either. The caller gets the lost reply's error.
func TestLostReplyRunsOnce(t *testing.T) {
	lossyDeployments(t, func(t *testing.T, ss servers, _ time.Duration, client func(testing.TB) redis.UniversalClient) {
		complete := func(s *redisstore.Store, key string, tok store.Token) error {
			_, err := s.Complete(bg, key, tok, store.Record{Value: []byte("v")}, time.Hour)
			return err
		}
		for _, tc := range []struct {
			name  string
			setup func(s *redisstore.Store, key string, tok store.Token) error
			lost  func(s *redisstore.Store, key string, tok store.Token) error
		}{
			{name: "complete", lost: complete},
			{name: "release", lost: func(s *redisstore.Store, key string, tok store.Token) error { return s.Release(bg, key, tok) }},
			{name: "forget", setup: complete, lost: func(s *redisstore.Store, key string, _ store.Token) error { return s.Forget(bg, key) }},
		} {
			s := newStore(t, client(t))
			key := "once-" + tc.name
			res, err := s.Claim(bg, key, claimReq("a"))
			if err != nil || res.Status != store.Claimed {
				t.Fatalf("%s: claim: %v %v", tc.name, res.Status, err)
			}
			if tc.setup != nil {
				if err := tc.setup(s, key, res.Token); err != nil {
					t.Fatalf("%s: setup: %v", tc.name, err)
				}
			}
			before := ss.scriptRuns(t)
			ss.pause()
			err = tc.lost(s, key, res.Token)
			ss.resume()
			if err == nil || errors.Is(err, store.ErrLeaseLost) || errors.Is(err, store.ErrInProgress) {
				t.Errorf("%s with its reply lost = %v, want the lost reply's error", tc.name, err)
			}
			if runs := ss.settledRuns(t, before+1) - before; runs != 1 {
				t.Errorf("%s whose reply was lost ran %d times, want 1", tc.name, runs)
			}
		}
	})
}

// A Claim, a Renew or a Get whose reply is lost is sent again by the
// store, with the same owner and token: the claim script answers the owner
// that holds the key with the same token, so the repeat reports the claim
// the lost copy made instead of leaving it a ghost that holds the key for
// a whole lease. A claim is not repeated past half its lease.
func TestLostReplyIsRepeated(t *testing.T) {
	lossyDeployments(t, func(t *testing.T, ss servers, rt time.Duration, client func(testing.TB) redis.UniversalClient) {
		for _, tc := range []struct {
			name  string
			lease time.Duration
			lost  func(s *redisstore.Store, key string, tok store.Token) (store.Token, error)
		}{
			{name: "claim", lease: time.Minute, lost: func(s *redisstore.Store, key string, _ store.Token) (store.Token, error) {
				res, err := s.Claim(bg, key, claimReq("a"))
				if err == nil && res.Status != store.Claimed {
					err = fmt.Errorf("claim = %v", res.Status)
				}
				return res.Token, err
			}},
			{name: "renew", lease: time.Minute, lost: func(s *redisstore.Store, key string, tok store.Token) (store.Token, error) {
				return tok, s.Renew(bg, key, tok, time.Minute)
			}},
			{name: "get", lease: time.Minute, lost: func(s *redisstore.Store, key string, tok store.Token) (store.Token, error) {
				rec, err := s.Get(bg, key)
				return rec.Token, err
			}},
			{name: "claim-short-lease", lease: 2 * rt, lost: func(s *redisstore.Store, key string, _ store.Token) (store.Token, error) {
				res, err := s.Claim(bg, key, store.ClaimRequest{Owner: "a", Lease: 2 * rt, TTL: time.Hour})
				return res.Token, err
			}},
		} {
			prefix := fmt.Sprintf("rep%d:", prefixSeq.Add(1))
			s := newStoreWithPrefix(t, client(t), prefix)
			other := newStoreWithPrefix(t, client(t), prefix)
			key := "repeat-" + tc.name
			// Open the connection to the key's node (see lossyDeployments).
			if _, err := s.Get(bg, key); err != nil && !errors.Is(err, store.ErrNotFound) {
				t.Fatal(err)
			}
			var want store.Token
			switch tc.name {
			case "renew":
				res, err := other.Claim(bg, key, claimReq("a"))
				if err != nil {
					t.Fatal(err)
				}
				want = res.Token
			case "get":
				res, err := other.Claim(bg, key, claimReq("a"))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := other.Complete(bg, key, res.Token, store.Record{Value: []byte("v")}, time.Hour); err != nil {
					t.Fatal(err)
				}
				want = res.Token
			default:
				want = store.Token{Owner: "a"} // and the fence the first copy gave the key
			}
			before := ss.scriptRuns(t)
			ss.pause()
			type answer struct {
				tok store.Token
				err error
			}
			done := make(chan answer, 1)
			go func() {
				tok, err := tc.lost(s, key, want)
				done <- answer{tok, err}
			}()
			time.Sleep(rt * 3 / 2) // the first copy's reply is lost; the store repeats it after 10ms
			ss.resume()
			got := <-done
			runs := ss.settledRuns(t, before+1) - before
			t.Logf("%s: %+v %v, %d runs", tc.name, got.tok, got.err, runs)
			if tc.name == "claim-short-lease" {
				if got.err == nil || runs != 1 {
					t.Errorf("claim with a lease of %v, reply lost after %v = %v after %d runs, want the lost reply's error after 1",
						tc.lease, rt, got.err, runs)
				}
				continue
			}
			if got.err != nil || got.tok.Owner != want.Owner || want.Fence != 0 && got.tok.Fence != want.Fence {
				t.Errorf("%s with its first reply lost = %+v %v, want %+v", tc.name, got.tok, got.err, want)
			}
			if runs < 2 {
				t.Errorf("%s ran %d times, want the first copy and a repeat", tc.name, runs)
			}
			if tc.name == "claim" { // the key is a's, not a ghost's: b waits on a's fence
				res, err := other.Claim(bg, key, claimReq("b"))
				if err != nil || res.Status != store.InProgress || res.Token.Fence != got.tok.Fence {
					t.Errorf("claim b after a's repeated claim = %v fence %d %v, want in progress, fence %d",
						res.Status, res.Token.Fence, err, got.tok.Fence)
				}
			}
		}
	})
}

// migration is one slot of a 3-master cluster, moved from its node src to
// dst the way redis-cli --cluster reshard does it.
type migration struct {
	t        *testing.T
	slot     string
	src, dst *redistest.Server
	nodes    []*redistest.Server
	ids      map[*redistest.Server]string
}

func newMigration(t *testing.T, cl *redistest.Cluster, redisKey string) *migration {
	m := &migration{t: t, nodes: cl.Nodes, ids: map[*redistest.Server]string{}}
	m.slot = m.command(cl.Nodes[0], "CLUSTER", "KEYSLOT", redisKey)
	for _, n := range cl.Nodes {
		m.ids[n] = m.command(n, "CLUSTER", "MYID")
		if owns(t, m.command(n, "CLUSTER", "NODES"), m.slot) {
			m.src = n
		}
	}
	if m.src == nil {
		t.Fatalf("no node owns slot %s", m.slot)
	}
	for _, n := range cl.Nodes {
		if n != m.src {
			m.dst = n
			break
		}
	}
	return m
}

func (m *migration) command(n *redistest.Server, args ...string) string {
	m.t.Helper()
	out, err := redistest.Command(n.Addr, args...)
	if err != nil {
		m.t.Fatalf("%s %v: %v", n.Addr, args, err)
	}
	return out
}

// start marks the slot importing on dst and migrating on src, and moves
// keys to dst.
func (m *migration) start(keys ...string) {
	m.command(m.dst, "CLUSTER", "SETSLOT", m.slot, "IMPORTING", m.ids[m.src])
	m.command(m.src, "CLUSTER", "SETSLOT", m.slot, "MIGRATING", m.ids[m.dst])
	if len(keys) > 0 {
		host, port, _ := strings.Cut(m.dst.Addr, ":")
		m.command(m.src, append([]string{"MIGRATE", host, port, "", "0", "5000", "KEYS"}, keys...)...)
	}
}

// finish gives the slot to dst on every node.
func (m *migration) finish() {
	m.command(m.dst, "CLUSTER", "SETSLOT", m.slot, "NODE", m.ids[m.dst])
	for _, n := range m.nodes {
		if n != m.dst {
			m.command(n, "CLUSTER", "SETSLOT", m.slot, "NODE", m.ids[m.dst])
		}
	}
}

// errors returns how many error replies of a kind (ASK, MOVED, TRYAGAIN) n
// has sent.
func (m *migration) errors(n *redistest.Server, kind string) int {
	v := redistest.InfoField(m.command(n, "INFO", "errorstats"), "errorstat_"+kind)
	count, _ := strconv.Atoi(strings.TrimPrefix(v, "count="))
	return count
}

// In a cluster, a script call that meets ASK (its slot is migrating and
// its keys have left the node) or MOVED (its slot has moved) is still sent
// on to the node that holds its keys: a redirected call did not run, so
// following it is no re-send.
func TestClusterRedirectsAreFollowed(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	s := newStore(t, newClusterClient(t, cl))
	const key = "resharded"
	rk := s.RecordKey(key)
	m := newMigration(t, cl, rk)
	a, err := s.Claim(bg, key, claimReq("a"))
	if err != nil || a.Status != store.Claimed {
		t.Fatalf("claim a: %v %v", a.Status, err)
	}
	waiter := claimReq("b")
	waiter.Waiter = "instance-b" // makes the waiter set, the script's second key
	if b, err := s.Claim(bg, key, waiter); err != nil || b.Status != store.InProgress {
		t.Fatalf("claim b: %v %v", b.Status, err)
	}

	m.start(rk, rk+":w")
	b, err := s.Claim(bg, key, waiter)
	if err != nil || b.Status != store.InProgress || b.Token.Fence != a.Token.Fence {
		t.Fatalf("claim b while the slot migrates = %v fence %d %v, want in progress, fence %d", b.Status, b.Token.Fence, err, a.Token.Fence)
	}
	if n := m.errors(m.src, "ASK"); n == 0 {
		t.Error("the old node answered no ASK")
	}

	m.finish() // the client still sends the slot's calls to src, which answers MOVED
	if _, err := s.Complete(bg, key, a.Token, store.Record{Value: []byte("v")}, time.Hour); err != nil {
		t.Fatalf("complete a after the slot moved: %v", err)
	}
	if n := m.errors(m.src, "MOVED"); n == 0 {
		t.Error("the old node answered no MOVED")
	}
	if got := m.command(m.dst, "EXISTS", rk); got != "1" {
		t.Errorf("the record is not on the slot's new node (EXISTS %s)", got)
	}
	c, err := s.Claim(bg, key, claimReq("c"))
	if err != nil || c.Status != store.Completed || string(c.Record.Value) != "v" {
		t.Errorf("claim c after the move = %v %q %v, want completed, v", c.Status, c.Record.Value, err)
	}
}

// A new key's script calls meet TRYAGAIN while its slot migrates (the
// script's two keys are on neither node): the store sends them again, even
// a Release, which is never sent again after a lost reply, and once the
// migration is over they run. (A new key's claim is a SET of one key, not
// a script: the node that imports the slot takes it after ASK; the claim
// after the migration checks that it still sees the key as new.)
func TestClusterTryAgainIsRepeated(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	s := newStore(t, newClusterClient(t, cl))
	const key = "new-while-resharded"
	m := newMigration(t, cl, s.RecordKey(key))
	if _, err := s.Get(bg, key); !errors.Is(err, store.ErrNotFound) { // the client learns the slot's node
		t.Fatalf("get: %v", err)
	}
	m.start()
	done := make(chan error, 1)
	go func() { done <- s.Release(bg, key, store.Token{Fence: 1, Owner: "a"}) }()
	eventually(t, "a TRYAGAIN reply", func() bool { return m.errors(m.dst, "TRYAGAIN") > 0 })
	m.finish()
	if err := <-done; err != nil {
		t.Fatalf("release of an absent key while the slot migrates: %v", err)
	}
	res, err := s.Claim(bg, key, claimReq("a"))
	if err != nil || res.Status != store.Claimed || res.Takeover || res.Attempt != 1 {
		t.Fatalf("claim after the migration = %+v %v, want a first claim", res, err)
	}
}

// owns reports whether the CLUSTER NODES text of a node says that the node
// itself holds slot.
func owns(t *testing.T, nodes, slot string) bool {
	t.Helper()
	want, err := strconv.Atoi(slot)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(nodes, "\n") {
		f := strings.Fields(line)
		if len(f) < 8 || !strings.Contains(f[2], "myself") {
			continue
		}
		for _, r := range f[8:] {
			lo, hi, ok := strings.Cut(r, "-")
			if !ok {
				hi = lo
			}
			l, err1 := strconv.Atoi(lo)
			h, err2 := strconv.Atoi(hi)
			if err1 == nil && err2 == nil && l <= want && want <= h {
				return true
			}
		}
	}
	return false
}
