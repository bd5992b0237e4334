package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
)

// A runtime on PostgreSQL: the pool is the application's own, the store
// makes its table (once, idempotently) and keeps it clean. (Not run by the
// tests: it needs a server at that address; the tests start their own.)
func ExampleNew() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1:5432/orders")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	st, err := pgstore.New(ctx, pool, pgstore.Options{Schema: "idem", Table: "records"})
	if err != nil {
		panic(err) // PostgreSQL unreachable, or not at READ COMMITTED
	}
	defer st.Close() // before pool.Close
	if err := st.Migrate(ctx); err != nil {
		panic(err)
	}
	rt := idem.Must(idem.New(idem.Options{Store: st}))
	defer rt.Close(ctx)
	id, err := idem.Do(ctx, rt, "create-order:req-77", func(ctx context.Context) (string, error) {
		return "order-1234", nil
	})
	fmt.Println(id, err)
}

// The SQL that Migrate runs, for teams that keep their migrations in
// their own tool.
func ExampleSchemaSQL() {
	sql, err := pgstore.SchemaSQL(pgstore.Options{Schema: "idem", Table: "records"})
	if err != nil {
		panic(err)
	}
	fmt.Print(sql)
	// Output:
	// CREATE SCHEMA IF NOT EXISTS "idem";
	// CREATE TABLE "idem"."records" (
	//     key         bytea       PRIMARY KEY,
	//     state       text        NOT NULL,
	//     fence       bigint      NOT NULL,
	//     owner       bytea       NOT NULL,
	//     lease_until timestamptz,
	//     fingerprint bytea,
	//     result      bytea,
	//     created_at  timestamptz,
	//     expires_at  timestamptz NOT NULL,
	//     waiters     text[]
	// );
	// CREATE INDEX "records_expires_at" ON "idem"."records" (expires_at);
	// ALTER TABLE "idem"."records" ADD COLUMN attempt integer NOT NULL DEFAULT 1;
	// CREATE TABLE IF NOT EXISTS "idem"."records_live" (
	//     instance   text        PRIMARY KEY,
	//     live_until timestamptz NOT NULL
	// );
	// COMMENT ON TABLE "idem"."records" IS 'idem pgstore schema 3';
}

// Cleanup from a scheduled job rather than from every instance: the
// instances run with DisableCleanup, and the job deletes what has ended.
// (Not run by the tests.)
func ExampleStore_Cleanup() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1:5432/orders")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	st, err := pgstore.New(ctx, pool, pgstore.Options{DisableCleanup: true, CleanupBatch: 5000})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	n, err := st.Cleanup(ctx)
	fmt.Println("deleted", n, "rows", err)
}

// Read a key's state without claiming it; a row the store cannot read is a
// *CorruptError that names its key. (Not run by the tests.)
func ExampleStore_Inspect() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1:5432/orders")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	st, err := pgstore.New(ctx, pool, pgstore.Options{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	e, err := st.Inspect(ctx, "create-order:req-77")
	var corrupt *pgstore.CorruptError
	switch {
	case errors.As(err, &corrupt):
		fmt.Println("fix or delete the row of", corrupt.Key, "in", corrupt.Table, ":", corrupt.Reason)
	case err != nil:
		fmt.Println(err) // PostgreSQL failing
	case e.State == store.Held:
		fmt.Println("in progress, owner", e.Token.Owner, "lease left", e.LeaseLeft)
	case e.State == store.Done:
		fmt.Println("completed at", e.Record.CreatedAt, "value", string(e.Record.Value))
	default:
		fmt.Println("absent")
	}
}

// Forget the completed results of one scope, page by page, leaving keys in
// progress alone. (Not run by the tests.)
func ExampleStore_Scan() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1:5432/orders")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	st, err := pgstore.New(ctx, pool, pgstore.Options{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	prefix := store.BuildKey("", store.Scope{Namespace: "tenant-a", Version: "v1"})
	forgot, cursor := 0, ""
	for {
		keys, next, err := st.Scan(ctx, prefix, cursor, 500)
		if err != nil {
			panic(err)
		}
		for _, key := range keys {
			switch err := st.Forget(ctx, key); {
			case errors.Is(err, store.ErrInProgress): // a run holds it
			case err != nil:
				panic(err)
			default:
				forgot++
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	fmt.Println("forgot", forgot, "keys")
}

// Wake-ups from other instances: the runtime subscribes by itself; this
// is what it receives. (Not run by the tests.)
func ExampleStore_Subscribe() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@127.0.0.1:5432/orders")
	if err != nil {
		panic(err)
	}
	defer pool.Close()
	st, err := pgstore.New(ctx, pool, pgstore.Options{})
	if err != nil {
		panic(err)
	}
	defer st.Close()
	id, stop, err := st.Subscribe(ctx, func(key string) {
		if key == "" {
			fmt.Println("the listener reconnected: check every key waited on")
			return
		}
		fmt.Println(key, "settled")
	})
	if err != nil {
		panic(err)
	}
	defer stop()
	// A claim that finds the key held elsewhere lists this instance's
	// channel; the holder's completion notifies it.
	res, err := st.Claim(ctx, "k", store.ClaimRequest{Owner: "me-1", Lease: time.Minute, TTL: time.Hour, Waiter: id})
	fmt.Println(res.Status, err)
}
