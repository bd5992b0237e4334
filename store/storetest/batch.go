package storetest

import (
	"testing"

	"github.com/idemrt/idem/store"
)

func (s *suite) batch(t *testing.T) {
	st := s.h.New(t)
	ops := []*store.Op{
		{Kind: store.OpClaim, Key: "b1", Claim: store.ClaimRequest{Owner: "a", Lease: s.long(), TTL: s.long()}},
		{Kind: store.OpClaim, Key: "b1", Claim: store.ClaimRequest{Owner: "b", Lease: s.long(), TTL: s.long()}},
		{Kind: store.OpClaim, Key: "b2", Claim: store.ClaimRequest{Owner: "a", Lease: s.long(), TTL: s.long()}},
		{Kind: store.OpGet, Key: "b3"},
		{Kind: store.OpClaim, Key: "", Claim: store.ClaimRequest{Owner: "a", Lease: s.long(), TTL: s.long()}},
	}
	store.Run(ctx, st, ops)
	if ops[0].Err != nil || ops[0].Result.Status != store.Claimed {
		t.Fatalf("op 0: %v %v", ops[0].Result.Status, ops[0].Err)
	}
	if ops[1].Err != nil || ops[1].Result.Status != store.InProgress {
		t.Fatalf("op 1 (same key, later in the batch): %v %v", ops[1].Result.Status, ops[1].Err)
	}
	if ops[2].Err != nil || ops[2].Result.Status != store.Claimed {
		t.Fatalf("op 2: %v %v", ops[2].Result.Status, ops[2].Err)
	}
	wantErr(t, "op 3", ops[3].Err, store.ErrNotFound)
	wantErr(t, "op 4 (bad key in a batch)", ops[4].Err, store.ErrInvalidKey)
	fin := []*store.Op{
		{Kind: store.OpComplete, Key: "b1", Token: ops[0].Result.Token, Record: store.Record{Value: []byte("one")}, TTL: s.long()},
		{Kind: store.OpRelease, Key: "b2", Token: ops[2].Result.Token},
		{Kind: store.OpRenew, Key: "b2", Token: ops[2].Result.Token, Lease: s.long()},
	}
	store.Run(ctx, st, fin)
	if fin[0].Err != nil || string(fin[0].Result.Record.Value) != "one" {
		t.Fatalf("complete in a batch: %q %v", fin[0].Result.Record.Value, fin[0].Err)
	}
	if fin[1].Err != nil {
		t.Fatalf("release in a batch: %v", fin[1].Err)
	}
	wantErr(t, "renew after the release, same batch", fin[2].Err, store.ErrLeaseLost)
}
