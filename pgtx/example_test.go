package pgtx_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/pgtx"
	"github.com/idemrt/idem/store/pgstore"
)

// open returns a runtime on a pgstore and a pool for the work, both on the
// database at dsn.
func open(ctx context.Context, dsn string) (*idem.Runtime, *pgxpool.Pool, func()) {
	storePool, err := pgxpool.New(ctx, dsn) // the store's own pool
	if err != nil {
		panic(err)
	}
	st, err := pgstore.New(ctx, storePool, pgstore.Options{})
	if err != nil {
		panic(err)
	}
	if err := st.Migrate(ctx); err != nil {
		panic(err)
	}
	rt := idem.Must(idem.New(idem.Options{Store: st}))
	work, err := pgxpool.New(ctx, dsn) // the pool the functions' transactions use
	if err != nil {
		panic(err)
	}
	return rt, work, func() {
		_ = rt.Close(ctx)
		_ = st.Close()
		work.Close()
		storePool.Close()
	}
}

// A transfer whose rows commit with its idempotency record: retried, it
// replays; had the process died before COMMIT, nothing of it would have
// committed, and the retry would run it once.
func ExampleDo() {
	ctx := context.Background()
	dsn := exampleDatabase() // a PostgreSQL database (here, the tests' throwaway server)
	rt, work, done := open(ctx, dsn)
	defer done()

	transfer := func(ctx context.Context, tx pgx.Tx) (int64, error) {
		if _, err := tx.Exec(ctx, `UPDATE accounts SET cents = cents - 2500 WHERE id = 'alice'`); err != nil {
			return 0, err
		}
		var left int64
		err := tx.QueryRow(ctx, `UPDATE accounts SET cents = cents + 2500 WHERE id = 'bob' RETURNING cents`).Scan(&left)
		return left, err
	}
	for range 3 { // the request and two retries
		bob, err := pgtx.Do(ctx, rt, work, "transfer-1", transfer)
		fmt.Println(bob, err)
	}
	var alice int64
	_ = work.QueryRow(ctx, `SELECT cents FROM accounts WHERE id = 'alice'`).Scan(&alice)
	fmt.Println("alice:", alice)
	// Output:
	// 2500 <nil>
	// 2500 <nil>
	// 2500 <nil>
	// alice: 7500
}

// Inside a transaction the caller holds: the key's record joins it, and the
// caller reports its commit.
func ExampleJoin() {
	ctx := context.Background()
	dsn := exampleDatabase()
	rt, work, done := open(ctx, dsn)
	defer done()

	tx, err := work.Begin(ctx)
	if err != nil {
		panic(err)
	}
	defer tx.Rollback(ctx) // a no-op after Commit
	p, err := pgtx.Join(ctx, rt, tx, "charge-7", func(ctx context.Context, tx pgx.Tx) (int64, error) {
		var id int64
		err := tx.QueryRow(ctx, `INSERT INTO charges (key, run, amount) VALUES ('charge-7', 'join', 900) RETURNING id`).Scan(&id)
		return id, err
	})
	if err != nil {
		panic(err)
	}
	// ... the caller's own statements in tx ...
	id, err := p.Settle(tx.Commit(ctx))
	fmt.Println(id, err)
	// Output: 1 <nil>
}

// A refusal that must be kept with the rows that record it.
func ExampleKeepWork() {
	ctx := context.Background()
	dsn := exampleDatabase()
	rt, work, done := open(ctx, dsn)
	defer done()

	for range 2 {
		_, err := pgtx.Do(ctx, rt, work, "charge-9", func(ctx context.Context, tx pgx.Tx) (int64, error) {
			if _, err := tx.Exec(ctx, `INSERT INTO charges (key, run, amount) VALUES ('charge-9', 'refused', 0)`); err != nil {
				return 0, err
			}
			return 0, pgtx.KeepWork(errors.New("limit exceeded"))
		})
		fmt.Println(err, idem.IsPermanent(err))
	}
	var n int
	_ = work.QueryRow(ctx, `SELECT count(*) FROM charges WHERE key = 'charge-9'`).Scan(&n)
	fmt.Println("rows:", n)
	// Output:
	// limit exceeded true
	// limit exceeded true
	// rows: 1
}
