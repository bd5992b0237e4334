package storetest

import (
	"hash/maphash"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/idemrt/idem/store"
)

// The states of a key in the model.
const (
	absent uint8 = iota
	held
	done
)

// keyState is the model's view of one key. It is comparable, so porcupine
// compares states with ==.
type keyState struct {
	now       time.Duration // exact clock only: time since the history began
	state     uint8
	owner     string
	fence     uint64 // 0 while unknown: the claim's reply was lost
	lastFence uint64 // a lower bound of the next fence, in any record of the key
	attempt   uint32 // the holder's attempt (held)
	fp        string
	leaseEnd  time.Duration // exact clock only
	rec       LinearRecord
	recEnd    time.Duration // exact clock only
}

// LinearModel is the sequential specification of the store contract as a
// porcupine model of one key, with histories partitioned by key. The
// outcomes the contract leaves to the store are accepted and then held
// against it: the fence of a new claim only has to be larger than every
// earlier one of the key (in its earlier records too: released, forgotten
// or expired), and once seen it is the fence the key's holder must show. A
// claim's attempt is the model's own: 1 for a claim that creates the
// record, one more for a takeover, the holder's for its claim sent again.
//
// With exact set, the store's clock moves only by the advances recorded in
// the history (a fake clock read inside each operation's critical section):
// leases expire, keys are taken over and records expire at the exact
// nanosecond, and lease left, takeover flags and record times are checked
// exactly. Without it, no lease or TTL may end during a history; lease left
// must lie in (0, maxLease] and a record's life within tol of its TTL.
//
// A call of unknown outcome may take effect or not; a claim of unknown
// outcome leaves the holder's fence unknown until a later reply shows it,
// and meanwhile a call with the holder's owner and another fence may be
// refused or accepted (the only steps where the model branches).
//
// What it does not cover:
//   - an in-progress (or, on Redis, released) record dropped after its lease
//     and TTL: histories keep the TTLs of claims longer than the history;
//   - the clock as one object: each key's history holds its own copy of every
//     advance, so an advance may be ordered differently relative to
//     concurrent calls on different keys (a weaker check, never a false one);
//   - without an exact clock: expiry, takeover (the flag must be false),
//     what Renew does to the lease, and record times beyond their length;
//   - waiters and wake-ups, batches, invalid arguments and keys, eviction,
//     the store's own failures (they are calls of unknown outcome);
//   - the fingerprint of a completed record against its claim, and anything
//     about how records look in the store's own storage.
func LinearModel(exact bool, maxLease, tol time.Duration) porcupine.Model {
	m := linearModel{exact: exact, maxLease: maxLease, tol: tol}
	seed := maphash.MakeSeed()
	nm := porcupine.NondeterministicModel{
		Partition: partitionByKey,
		Init:      func() []any { return []any{keyState{}} },
		Step: func(state, input, output any) []any {
			next := m.step(state.(keyState), input.(LinearInput), output.(LinearOutput))
			out := make([]any, len(next))
			for i, s := range next {
				out[i] = s
			}
			return out
		},
		Hash:              func(state any) uint64 { return maphash.Comparable(seed, state.(keyState)) },
		DescribeOperation: func(in, out any) string { return describe(in.(LinearInput), out.(LinearOutput)) },
		DescribeState:     func(state any) string { return state.(keyState).String() },
	}
	return nm.ToModel()
}

// partitionByKey splits a history by key; clock advances go to every key.
func partitionByKey(history []porcupine.Operation) [][]porcupine.Operation {
	var ticks []porcupine.Operation
	byKey := map[string][]porcupine.Operation{}
	var keys []string
	for _, op := range history {
		k := op.Input.(LinearInput).Key
		if op.Input.(LinearInput).Kind == 0 {
			ticks = append(ticks, op)
			continue
		}
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], op)
	}
	out := make([][]porcupine.Operation, 0, len(keys))
	for _, k := range keys {
		out = append(out, append(byKey[k], ticks...))
	}
	return out
}

type linearModel struct {
	exact    bool
	maxLease time.Duration
	tol      time.Duration
}

func one(s keyState) []keyState { return []keyState{s} }

func (m linearModel) step(s keyState, in LinearInput, out LinearOutput) []keyState {
	switch in.Kind {
	case 0:
		s.now += in.Advance
		if s.state == done && s.now >= s.recEnd {
			s = keyState{now: s.now, lastFence: s.lastFence}
		}
		return one(s)
	case store.OpClaim:
		return m.claim(s, in, out)
	case store.OpComplete:
		return m.complete(s, in, out)
	case store.OpRelease:
		return m.holderOp(s, in, out, func(s keyState) keyState {
			return keyState{now: s.now, lastFence: max(s.lastFence, s.fence)}
		})
	case store.OpRenew:
		return m.renew(s, in, out)
	case store.OpGet:
		if out.Unknown {
			return one(s)
		}
		if s.state == done {
			if out.Err == NoError && m.sameRecord(s, out.Record) {
				return one(s)
			}
		} else if out.Err == NotFound {
			return one(s)
		}
	case store.OpForget:
		switch {
		case s.state == held && (out.Unknown || out.Err == InProgress):
			return one(s)
		case s.state == done && (out.Unknown || out.Err == NoError):
			return one(keyState{now: s.now, lastFence: s.lastFence})
		case s.state == absent && (out.Unknown || out.Err == NoError):
			return one(s)
		}
	}
	return nil
}

func (m linearModel) leaseLive(s keyState) bool { return !m.exact || s.now < s.leaseEnd }

func (m linearModel) claim(s keyState, in LinearInput, out LinearOutput) []keyState {
	switch {
	case s.state == done:
		if out.Unknown || (out.Err == NoError && out.Status == store.Completed && m.sameRecord(s, out.Record)) {
			return one(s)
		}
		return nil
	case s.state == held && s.owner == in.Owner: // a replayed claim
		if out.Unknown {
			return one(s)
		}
		if out.Err != NoError || out.Status != store.Claimed || out.Takeover || out.Token.Owner != in.Owner ||
			out.Attempt != s.attempt || !m.leaseLeft(s, out.LeaseLeft) {
			return nil
		}
		return m.sameFence(s, out.Token.Fence)
	case s.state == held && m.leaseLive(s):
		if out.Unknown {
			return one(s)
		}
		if out.Err != NoError || out.Status != store.InProgress || out.Token.Owner != "" ||
			out.Fingerprint != s.fp || !m.leaseLeft(s, out.LeaseLeft) {
			return nil
		}
		return m.sameFence(s, out.Token.Fence)
	}
	// Absent, or held under an expired lease: a new claim.
	takeover := s.state == held
	n := keyState{now: s.now, state: held, owner: in.Owner, lastFence: max(s.lastFence, s.fence),
		attempt: 1, fp: in.Fingerprint, leaseEnd: s.now + in.Lease}
	if takeover {
		n.attempt = s.attempt + 1
	}
	if out.Unknown {
		return one(n) // its fence is unknown until a reply shows it
	}
	if out.Err != NoError || out.Status != store.Claimed || out.Takeover != takeover ||
		out.Token.Owner != in.Owner || out.Token.Fence <= n.lastFence || out.Attempt != n.attempt {
		return nil
	}
	if m.exact && out.LeaseLeft != in.Lease || !m.exact && (out.LeaseLeft <= 0 || out.LeaseLeft > in.Lease) {
		return nil
	}
	n.fence, n.lastFence = out.Token.Fence, out.Token.Fence
	return one(n)
}

// sameFence accepts the holder's fence shown by a reply: the known one, or
// the first one seen after a claim whose reply was lost.
func (m linearModel) sameFence(s keyState, fence uint64) []keyState {
	switch {
	case s.fence == fence:
		return one(s)
	case s.fence == 0 && fence > s.lastFence:
		s.fence, s.lastFence = fence, fence
		return one(s)
	}
	return nil
}

func (m linearModel) leaseLeft(s keyState, left time.Duration) bool {
	if m.exact {
		return left == s.leaseEnd-s.now
	}
	return left > 0 && left <= m.maxLease
}

// holderOp steps an operation that only the holder's token may perform
// (Release; Complete and Renew share its matching): apply turns the state of a
// key held by the token into the state after the operation.
func (m linearModel) holderOp(s keyState, in LinearInput, out LinearOutput, apply func(keyState) keyState) []keyState {
	if in.Kind == store.OpRelease && s.state == absent {
		if out.Unknown || out.Err == NoError {
			return one(s)
		}
		return nil
	}
	match := s.state == held && s.owner == in.Token.Owner
	switch {
	case match && s.fence == in.Token.Fence:
		if out.Unknown || out.Err == NoError {
			return one(apply(s))
		}
		return nil
	case match && s.fence == 0 && in.Token.Fence > s.lastFence:
		// The holder's fence is unknown; the token may carry it.
		bound := s
		bound.fence, bound.lastFence = in.Token.Fence, in.Token.Fence
		switch {
		case out.Unknown:
			return []keyState{s, apply(bound)}
		case out.Err == NoError:
			return one(apply(bound))
		case out.Err == LeaseLost:
			return one(s)
		}
		return nil
	}
	if out.Unknown || out.Err == LeaseLost {
		return one(s)
	}
	return nil
}

func (m linearModel) complete(s keyState, in LinearInput, out LinearOutput) []keyState {
	if s.state == done && s.rec.Token == in.Token { // a replay: the stored record
		if out.Unknown || out.Err == NoError && m.sameRecord(s, out.Record) {
			return one(s)
		}
		return nil
	}
	rec := LinearRecord{Value: in.Value, Failed: in.Failed, Error: in.Error, Fingerprint: in.Fingerprint,
		Token: in.Token, Created: s.now, Life: in.TTL}
	if in.Failed {
		rec.Value = ""
	} else {
		rec.Error = ""
	}
	if !out.Unknown && out.Err == NoError && !m.sameRecord(keyState{rec: rec}, out.Record) {
		return nil
	}
	return m.holderOp(s, in, out, func(s keyState) keyState {
		return keyState{now: s.now, state: done, lastFence: s.lastFence, rec: rec, recEnd: s.now + in.TTL}
	})
}

func (m linearModel) renew(s keyState, in LinearInput, out LinearOutput) []keyState {
	return m.holderOp(s, in, out, func(s keyState) keyState {
		s.leaseEnd = s.now + in.Lease
		return s
	})
}

// sameRecord compares a record in a reply with the key's record.
func (m linearModel) sameRecord(s keyState, got LinearRecord) bool {
	want := s.rec
	if got.Value != want.Value || got.Failed != want.Failed || got.Error != want.Error ||
		got.Fingerprint != want.Fingerprint || got.Token != want.Token {
		return false
	}
	if m.exact {
		return got.Created == want.Created && got.Life == want.Life
	}
	d := got.Life - want.Life
	return d >= -m.tol && d <= m.tol
}
