package river_test

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/idemrt/idem/pgtx"
)

// A job inserted with InsertTx in a pgtx function's transaction commits
// with the key's record: calling again for the key replays and inserts
// no second job (River as the outbox of docs/effects.md).
func TestInsertTxInPgtx(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ins := e.inserter(t)
	key := order()
	for range 2 {
		_, err := pgtx.Do(testCtx(t), e.rt, e.work, "enqueue:"+key, func(ctx context.Context, tx pgx.Tx) (struct{}, error) {
			_, err := ins.InsertTx(ctx, tx, ChargeArgs{Order: key}, nil)
			return struct{}{}, err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := e.work.QueryRow(testCtx(t), `SELECT count(*) FROM river_job WHERE args->>'order' = $1`, key).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("%d jobs; want 1", n)
	}
}
