package storetest

import (
	"fmt"
	"time"

	"github.com/idemrt/idem/store"
)

// LinearInput is one call in a history checked by [LinearModel]: a store
// operation on Key, or a clock advance (Kind 0, no key) that every key sees.
type LinearInput struct {
	Kind store.OpKind // 0: the store's clock moved forward by Advance
	Key  string
	// Claim.
	Owner string
	Lease time.Duration // also Renew
	// Fingerprint of a Claim, or of the record a Complete stores.
	Fingerprint string
	// Complete, Release, Renew.
	Token store.Token
	// Complete: the record to store and its TTL.
	Value  string
	Failed bool
	Error  string
	TTL    time.Duration
	// Clock advance.
	Advance time.Duration
}

// LinearError is a contract error as a history records it.
type LinearError uint8

// The errors a store operation can answer with in a checked history.
const (
	NoError LinearError = iota
	LeaseLost
	NotFound
	InProgress
	OtherError // a contract error the operation must never return
)

func (e LinearError) String() string {
	return [...]string{"ok", "lease-lost", "not-found", "in-progress", "other-error"}[e]
}

// LinearOutput is the answer to a [LinearInput].
type LinearOutput struct {
	// Unknown marks a call whose outcome is unknown (a timeout, a lost
	// connection): it may have taken effect or not. Record it as returning
	// at the end of the history (math.MaxInt64), so that it can be
	// linearized anywhere after its call, including after every other call.
	Unknown bool
	Err     LinearError
	// Claim.
	Status    store.Status
	Token     store.Token
	Takeover  bool
	Attempt   uint32
	LeaseLeft time.Duration
	// Fingerprint of the holder (InProgress).
	Fingerprint string
	// Record of Claim (Completed), Complete and Get.
	Record LinearRecord
}

// LinearRecord is a store.Record as a history records it.
type LinearRecord struct {
	Value       string
	Failed      bool
	Error       string
	Fingerprint string
	Token       store.Token
	// Created is CreatedAt as an offset from the history's time origin
	// (only compared when the clock is exact); Life is ExpiresAt-CreatedAt.
	Created time.Duration
	Life    time.Duration
}

func (s keyState) String() string {
	var b string
	switch s.state {
	case absent:
		b = "absent"
	case held:
		fence := "?"
		if s.fence != 0 {
			fence = fmt.Sprint(s.fence)
		}
		b = fmt.Sprintf("held by %s/%s fp=%q", s.owner, fence, s.fp)
	case done:
		b = fmt.Sprintf("done %s", describeRecord(s.rec))
	}
	b += fmt.Sprintf(" last=%d", s.lastFence)
	if s.now != 0 || s.leaseEnd != 0 {
		b += fmt.Sprintf(" now=%v leaseEnd=%v recEnd=%v", s.now, s.leaseEnd, s.recEnd)
	}
	return b
}

func describeRecord(r LinearRecord) string {
	v := fmt.Sprintf("value=%q", r.Value)
	if r.Failed {
		v = fmt.Sprintf("error=%q", r.Error)
	}
	return fmt.Sprintf("{%s fp=%q by %s/%d created=%v life=%v}", v, r.Fingerprint, r.Token.Owner, r.Token.Fence, r.Created, r.Life)
}

func describe(in LinearInput, out LinearOutput) string {
	var call string
	switch in.Kind {
	case 0:
		return fmt.Sprintf("advance(%v)", in.Advance)
	case store.OpClaim:
		call = fmt.Sprintf("claim(%s, %s, fp=%q, lease=%v)", in.Key, in.Owner, in.Fingerprint, in.Lease)
	case store.OpComplete:
		v := fmt.Sprintf("value=%q", in.Value)
		if in.Failed {
			v = fmt.Sprintf("error=%q", in.Error)
		}
		call = fmt.Sprintf("complete(%s, %s/%d, %s, ttl=%v)", in.Key, in.Token.Owner, in.Token.Fence, v, in.TTL)
	case store.OpRelease:
		call = fmt.Sprintf("release(%s, %s/%d)", in.Key, in.Token.Owner, in.Token.Fence)
	case store.OpRenew:
		call = fmt.Sprintf("renew(%s, %s/%d, %v)", in.Key, in.Token.Owner, in.Token.Fence, in.Lease)
	case store.OpGet:
		call = fmt.Sprintf("get(%s)", in.Key)
	case store.OpForget:
		call = fmt.Sprintf("forget(%s)", in.Key)
	}
	return call + " -> " + describeOutput(in, out)
}

func describeOutput(in LinearInput, out LinearOutput) string {
	switch {
	case out.Unknown:
		return "unknown"
	case out.Err != NoError:
		return out.Err.String()
	}
	switch in.Kind {
	case store.OpClaim:
		switch out.Status {
		case store.Claimed:
			return fmt.Sprintf("claimed %s/%d takeover=%v attempt=%d left=%v", out.Token.Owner, out.Token.Fence, out.Takeover,
				out.Attempt, out.LeaseLeft)
		case store.InProgress:
			return fmt.Sprintf("in-progress fence=%d fp=%q left=%v", out.Token.Fence, out.Fingerprint, out.LeaseLeft)
		case store.Completed:
			return "completed " + describeRecord(out.Record)
		}
		return out.Status.String()
	case store.OpComplete, store.OpGet:
		return describeRecord(out.Record)
	}
	return "ok"
}
