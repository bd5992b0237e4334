package redisstore

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/store"
)

// decodeReply runs decode on op with the reply val (or the command error
// err), as Batch does after a pipeline.
func decodeReply(s *Store, op *store.Op, val any, err error, now time.Time) {
	s.decode(call{op: op, keys: s.keys(op.Key), cmd: redis.NewCmdResult(val, err)}, now)
}

// A reply the op's script never sends (no code, a code of another script,
// a record state other than c or f) is a *CorruptError. It used to be read
// as the nearest outcome: an empty or non-numeric reply to complete, fail
// or extend as ErrLeaseLost and to get as ErrNotFound, an unknown code to
// complete, fail, extend or forget as success (complete with a zero
// record), and a record in state "x" as a value.
func TestDecodeUnexpectedReplyIsCorrupt(t *testing.T) {
	s := &Store{prefix: "idem:"}
	now := time.Now()
	replies := map[store.OpKind][][]any{
		store.OpClaim:    {{}, {nil}, {"one"}, {0}, {4}, {2, "x", "v", "", int64(1), "o", int64(0), int64(1), int64(0)}},
		store.OpComplete: {{}, {nil}, {true}, {3}, {7}, {2, "p", "v", "", int64(0), int64(1), int64(0)}},
		store.OpFail:     {{}, {"x"}, {2}},
		store.OpExtend:   {{}, {5}},
		store.OpGet:      {{}, {true}, {1}, {3}, {2, "r", "v", "", int64(1), "o", int64(0), int64(1), int64(0)}},
		store.OpForget:   {{}, {0}, {2}, {4}},
	}
	for kind, rs := range replies {
		for _, vals := range rs {
			op := &store.Op{Kind: kind, Key: "order-1", Claim: store.ClaimRequest{Owner: "o"},
				Token: store.Token{Fence: 1, Owner: "o"}, TTL: time.Hour}
			decodeReply(s, op, vals, nil, now)
			var ce *CorruptError
			if !errors.As(op.Err, &ce) || ce.Key != "order-1" {
				t.Errorf("%v reply %#v: err %v, result %+v; want a *CorruptError", kind, vals, op.Err, op.Result)
			}
		}
	}
}
