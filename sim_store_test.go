package idem_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"hash/fnv"
	"regexp"
	"time"

	"github.com/idemrt/idem/store"
)

// simStore is one runtime's view of the shared store: it forwards every
// operation to the world's memstore, records what the store applied (even
// when the answer is then lost), and injects faults. It implements
// store.Waker by forwarding Subscribe (losing some wake-ups).
type simStore struct {
	w  *simWorld
	rt *simRT
}

// simInlineStore is a simStore the runtime treats as in-process: it runs
// the operations on its shard goroutines and owners complete keys
// themselves. It never delays (an in-process store does not block), but it
// still fails.
type simInlineStore struct{ *simStore }

func (simInlineStore) InProcess() {}

// simOwnerStore is a simInlineStore whose owners also complete their keys
// themselves (store.OwnerCompleter), as memstore's do: a call then claims
// its key on its own goroutine and owns it without the shard (see
// actors/direct.go) until the shard needs to hear of it.
type simOwnerStore struct{ simInlineStore }

func (simOwnerStore) OwnerCompletes() {}

var (
	_ store.Store          = (*simStore)(nil)
	_ store.Waker          = (*simStore)(nil)
	_ store.InProcess      = simInlineStore{}
	_ store.OwnerCompleter = simOwnerStore{}
)

// errSimFault is the error of an injected store fault.
var errSimFault = errors.New("sim: injected store fault")

// simFault is what happens to one store operation.
type simFault struct {
	before      bool          // fail without applying
	lost        bool          // apply, then fail: the answer is lost
	delayBefore time.Duration // fake time before applying
	delayAfter  time.Duration // fake time between applying and answering
	what        string
}

func simHash(seed uint64, parts ...any) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			h.Write([]byte(v))
			h.Write([]byte{0})
		case int:
			binary.LittleEndian.PutUint64(b[:], uint64(v))
			h.Write(b[:])
		}
	}
	return h.Sum64()
}

// decide draws the fault of r's next operation of kind on key from a hash
// of (seed, runtime, key, kind, count): the same however goroutines
// interleave. Called with w.mu held.
func (w *simWorld) decide(r *simRT, key string, kind store.OpKind) simFault {
	k := key + "/" + kind.String()
	n := r.opN[k]
	r.opN[k]++
	if w.faultsOff.Load() || w.cfg.faults == 0 {
		return simFault{}
	}
	h := simHash(w.seed, r.slot, r.inc, key, int(kind), n)
	if h%1000 >= uint64(w.cfg.faults) {
		return simFault{}
	}
	h /= 1000
	choice := h % 100
	h /= 100
	delay := time.Duration(20+h%280) * time.Millisecond
	switch {
	case choice < 35:
		return simFault{before: true, what: "error before applying"}
	case choice < 70:
		return simFault{lost: true, what: "applied, answer lost"}
	case w.cfg.inline && choice < 85:
		return simFault{before: true, what: "error before applying"}
	case w.cfg.inline:
		return simFault{lost: true, what: "applied, answer lost"}
	case choice < 80:
		return simFault{delayBefore: delay, what: "slow request (" + delay.String() + ")"}
	case choice < 90:
		return simFault{delayAfter: delay, what: "slow answer (" + delay.String() + ")"}
	case choice < 95:
		return simFault{delayBefore: delay, before: true, what: "timeout before applying (" + delay.String() + ")"}
	default:
		return simFault{delayAfter: delay, lost: true, what: "applied, then timeout (" + delay.String() + ")"}
	}
}

// dropWake reports whether a wake-up of key for r is lost.
func (w *simWorld) dropWake(r *simRT, key string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := r.wakeN[key]
	r.wakeN[key]++
	if w.faultsOff.Load() || w.cfg.dropWake == 0 {
		return false
	}
	return simHash(w.seed, r.slot, r.inc, key, "wake", n)%1000 < uint64(w.cfg.dropWake)
}

// sleepFake waits until the fake clock has moved d, or ctx ends.
func (w *simWorld) sleepFake(ctx context.Context, d time.Duration) bool {
	ch := make(chan struct{})
	w.afterFunc(d, func() { close(ch) })
	w.busy.Add(-1)
	defer w.busy.Add(1)
	select {
	case <-ch:
		return true
	case <-ctx.Done():
		return false
	}
}

// op runs one store operation for s's runtime: apply (with the clock held
// still) unless the fault says otherwise, and delivered once the answer
// reaches the runtime.
func (s *simStore) op(ctx context.Context, key string, kind store.OpKind, apply func() error, delivered func()) error {
	w := s.w
	w.busy.Add(1)
	defer func() {
		w.busy.Add(-1)
		w.bump()
	}()
	w.bump()
	w.mu.Lock()
	f := s.w.decide(s.rt, key, kind)
	fi := -1
	if f.what != "" {
		fi = len(w.faults)
		now := w.now()
		w.faults = append(w.faults, simFaultRec{rt: s.rt, from: now, to: now, what: f.what})
	}
	w.mu.Unlock()
	endFault := func() {
		if fi >= 0 {
			w.mu.Lock()
			w.faults[fi].to = w.now()
			w.mu.Unlock()
		}
	}
	defer endFault()
	if f.what != "" {
		w.logf("%s %s %s: fault: %s", s.rt.name, kind, key, f.what)
	}
	if f.delayBefore > 0 && !w.sleepFake(ctx, f.delayBefore) {
		return ctx.Err()
	}
	if f.before {
		return errSimFault
	}
	var err error
	w.storeOp(key, func() { err = apply() })
	if f.delayAfter > 0 && !w.sleepFake(ctx, f.delayAfter) {
		return ctx.Err()
	}
	if f.lost {
		return errSimFault
	}
	if delivered != nil {
		delivered()
	}
	return err
}

func (s *simStore) Claim(ctx context.Context, key string, req store.ClaimRequest) (store.ClaimResult, error) {
	var res store.ClaimResult
	var tk *simToken
	err := s.op(ctx, key, store.OpClaim, func() error {
		var err error
		res, err = s.w.mem.Claim(ctx, key, req)
		if err == nil && res.Status == store.Claimed {
			tk = s.w.noteClaim(s.rt, key, req, res)
		}
		return err
	}, func() {
		if tk != nil {
			s.w.mu.Lock()
			s.rt.claimed[key] = tk.tok
			tk.delivered = s.w.now()
			s.w.mu.Unlock()
		}
	})
	return res, err
}

func (s *simStore) Complete(ctx context.Context, key string, tok store.Token, rec store.Record, ttl time.Duration) (store.Record, error) {
	var out store.Record
	err := s.op(ctx, key, store.OpComplete, func() error {
		var err error
		out, err = s.w.mem.Complete(ctx, key, tok, rec, ttl)
		if err == nil {
			s.w.noteComplete(s.rt, key, tok, out)
		}
		return err
	}, nil)
	return out, err
}

func (s *simStore) Release(ctx context.Context, key string, tok store.Token) error {
	return s.op(ctx, key, store.OpRelease, func() error {
		err := s.w.mem.Release(ctx, key, tok)
		if err == nil {
			s.w.noteEnded(tok, "released")
		}
		return err
	}, nil)
}

func (s *simStore) Renew(ctx context.Context, key string, tok store.Token, lease time.Duration) error {
	return s.op(ctx, key, store.OpRenew, func() error {
		err := s.w.mem.Renew(ctx, key, tok, lease)
		if err == nil {
			s.w.noteRenew(tok, lease)
		}
		return err
	}, nil)
}

func (s *simStore) Get(ctx context.Context, key string) (store.Record, error) {
	var out store.Record
	err := s.op(ctx, key, store.OpGet, func() error {
		var err error
		out, err = s.w.mem.Get(ctx, key)
		return err
	}, nil)
	return out, err
}

func (s *simStore) Forget(ctx context.Context, key string) error {
	return s.op(ctx, key, store.OpForget, func() error {
		err := s.w.mem.Forget(ctx, key)
		if err == nil {
			s.w.noteForget(key)
		}
		return err
	}, nil)
}

func (s *simStore) Subscribe(ctx context.Context, fn func(string)) (string, func(), error) {
	s.w.mu.Lock()
	s.rt.wakeFn = fn
	s.w.mu.Unlock()
	return s.w.mem.Subscribe(ctx, func(key string) {
		if key != "" && s.w.dropWake(s.rt, key) {
			s.w.logf("%s: wake-up of %s lost", s.rt.name, key)
			return
		}
		s.w.mu.Lock()
		s.w.wakes = append(s.w.wakes, simWake{rt: s.rt, key: key, fn: fn})
		s.w.mu.Unlock()
		s.w.bump()
	})
}

// nextWake takes the first wake-up waiting to be delivered, if any.
func (w *simWorld) nextWake() (simWake, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.wakes) == 0 {
		return simWake{}, false
	}
	wk := w.wakes[0]
	w.wakes = w.wakes[1:]
	return wk, true
}

// noteClaim records a claim the store granted.
func (w *simWorld) noteClaim(r *simRT, key string, req store.ClaimRequest, res store.ClaimResult) *simToken {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	if tk := w.tokens[res.Token.Fence]; tk != nil {
		return tk // the same owner claimed again: nothing changed
	}
	tk := &simToken{
		tok:      res.Token,
		key:      key,
		rt:       r,
		lease:    req.Lease,
		ttl:      req.TTL,
		fp:       string(req.Fingerprint),
		applied:  now,
		leaseEnd: now.Add(req.Lease),
	}
	w.tokens[res.Token.Fence] = tk
	if last := w.lastTok[key]; last == nil || last.tok.Fence < tk.tok.Fence {
		w.lastTok[key] = tk
	}
	how := "claimed"
	if res.Takeover {
		how = "taken over"
	}
	w.logf("%s: store: %s %s, token %d, lease %v, fp %q", r.name, key, how, res.Token.Fence, req.Lease, tk.fp)
	return tk
}

func (w *simWorld) noteRenew(tok store.Token, lease time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	tk := w.tokens[tok.Fence]
	if tk == nil {
		return
	}
	now := w.now()
	if !now.Before(tk.leaseEnd) {
		w.lapses = append(w.lapses, simLapse{tok: tk, from: tk.leaseEnd, to: now})
	}
	tk.leaseEnd = now.Add(lease)
	for _, x := range tk.execs {
		if x.call.noRenew && x.running {
			w.renewalsNR = append(w.renewalsNR, simRenewal{tok: tk, at: now, exec: x})
		}
	}
}

func (w *simWorld) noteEnded(tok store.Token, how string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if tk := w.tokens[tok.Fence]; tk != nil && !tk.ended {
		tk.ended, tk.endedAt = true, w.now()
		w.logf("%s: store: %s token %d %s", tk.rt.name, tk.key, tok.Fence, how)
	}
}

func (w *simWorld) noteForget(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	for _, r := range w.records[key] {
		if r.liveAt(now) {
			r.forgotten = now
			w.logf("store: %s's result (exec %s) forgotten", key, r.exec)
		}
	}
}

var simExecRe = regexp.MustCompile(`exec\[([^\]]+)\]`)

// simExecOf returns the execution named in a stored record.
func simExecOf(rec store.Record) string {
	if rec.Failed {
		if m := simExecRe.FindStringSubmatch(rec.Error); m != nil {
			return m[1]
		}
		return ""
	}
	var v simVal
	if json.Unmarshal(rec.Value, &v) != nil {
		return ""
	}
	return v.Exec
}

// noteComplete records a result the store accepted and checks that it
// replaces no other, and belongs to the claim that stored it.
func (w *simWorld) noteComplete(r *simRT, key string, tok store.Token, rec store.Record) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := w.now()
	tk := w.tokens[tok.Fence]
	if tk == nil {
		w.violate("unknowntoken/"+key, "%s completed %s with token %d, which no claim returned", r.name, key, tok.Fence)
		return
	}
	if tk.ended {
		return // a repeated Complete: the store gave back the record it kept
	}
	tk.ended, tk.endedAt = true, now
	id := simExecOf(rec)
	w.seq++
	nr := &simRecord{key: key, tok: tok, exec: id, failed: rec.Failed, fp: string(rec.Fingerprint), created: rec.CreatedAt, seq: w.seq, expires: rec.ExpiresAt}
	w.logf("%s: store: %s completed by token %d with exec %s's result (failed %v, fp %q, expires in %v)",
		r.name, key, tok.Fence, id, rec.Failed, nr.fp, rec.ExpiresAt.Sub(now))
	for _, old := range w.records[key] {
		if old.liveAt(now) && old.tok != tok {
			w.violate("replaced/"+key+"/"+id, "exec %s's result for %s (token %d) replaced exec %s's (token %d), stored at %s, live until %s",
				id, key, tok.Fence, old.exec, old.tok.Fence, w.at(old.created), w.at(old.expires))
		}
	}
	x := w.execByID[id]
	switch {
	case x == nil:
		w.violate("phantomrecord/"+key+"/"+id, "the store accepted for %s a result naming exec %q, which never ran", key, id)
	case x.tok != tok:
		w.violate("recordtoken/"+id, "exec %s ran under token %d, but its result was stored with token %d", id, x.tok.Fence, tok.Fence)
	case x.call.fp != nr.fp:
		w.violate("recordfp/"+id, "exec %s (fingerprint %q) was stored with fingerprint %q", id, x.call.fp, nr.fp)
	}
	w.records[key] = append(w.records[key], nr)
	if id != "" {
		w.recByExec[id] = nr
	}
}
