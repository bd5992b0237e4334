package pgstore_test

import (
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/pgstore"
)

// schemaV1 is the SQL of schema version 1 (before attempts were counted),
// as SchemaSQL printed it, for a table named {T}.
const schemaV1 = `CREATE TABLE {T} (
    key         bytea       PRIMARY KEY,
    state       text        NOT NULL,
    fence       bigint      NOT NULL,
    owner       bytea       NOT NULL,
    lease_until timestamptz,
    fingerprint bytea,
    result      bytea,
    created_at  timestamptz,
    expires_at  timestamptz NOT NULL,
    waiters     text[]
);
CREATE INDEX {T}_expires_at ON {T} (expires_at);
COMMENT ON TABLE {T} IS 'idem pgstore schema 1';`

// A table of schema version 1, with rows as that version wrote them (fences
// counted from 1), is migrated in place: Migrate adds the attempt column,
// every row reads as attempt 1, and the store goes on with them. A
// takeover of an old claim is attempt 2 with a fence above the old one, its
// holder still completes it, an old result replays, and a key released or
// forgotten starts again at attempt 1 with a larger fence.
func TestMigrateFromVersion1(t *testing.T) {
	t.Parallel()
	pool := sharedPool(t)
	table := newTable()
	if _, err := pool.Exec(bg, strings.ReplaceAll(schemaV1, "{T}", table)); err != nil {
		t.Fatal(err)
	}
	rows := []struct {
		key, state string
		fence      int
		owner      string
		lease      string // lease_until
		result     *string
	}{
		{"ended", "p", 5, "a", "now() - interval '1 second'", nil},
		{"held", "p", 6, "a", "now() + interval '1 hour'", nil},
		{"released", "r", 9, "a", "NULL", nil},
		{"done", "c", 7, "o", "NULL", ptr(`"v"`)},
	}
	for _, r := range rows {
		created := "NULL"
		if r.result != nil {
			created = "now()"
		}
		_, err := pool.Exec(bg, "INSERT INTO "+table+` (key, state, fence, owner, lease_until, result, created_at, expires_at, waiters)
			VALUES ($1, $2, $3, $4, `+r.lease+`, $5, `+created+`, now() + interval '2 hours', '{}')`,
			[]byte(r.key), r.state, r.fence, []byte(r.owner), bytesOf(r.result))
		if err != nil {
			t.Fatal(err)
		}
	}
	s := newStore(t, pool, pgstore.Options{Table: table}) // Migrate included
	var comment string
	if err := pool.QueryRow(bg, `SELECT obj_description($1::regclass, 'pg_class')`, s.Table()).Scan(&comment); err != nil ||
		comment != "idem pgstore schema 3" {
		t.Fatalf("comment after Migrate %q, %v", comment, err)
	}

	res, err := s.Claim(bg, "ended", store.ClaimRequest{Owner: "b", Lease: time.Minute, TTL: time.Hour})
	if err != nil || res.Status != store.Claimed || !res.Takeover || res.Attempt != 2 || res.Token.Fence <= 5 {
		t.Fatalf("takeover of a version 1 claim: %+v, %v; want a takeover, attempt 2, a fence above 5", res, err)
	}
	old := store.Token{Fence: 6, Owner: "a"}
	res, err = s.Claim(bg, "held", store.ClaimRequest{Owner: "a", Lease: time.Minute, TTL: time.Hour})
	if err != nil || res.Status != store.Claimed || res.Token != old || res.Attempt != 1 || res.Takeover {
		t.Fatalf("the holder's claim again: %+v, %v; want %+v, attempt 1", res, err, old)
	}
	if rec, err := s.Complete(bg, "held", old, store.Record{Value: []byte("v")}, time.Hour); err != nil || rec.Token != old {
		t.Fatalf("Complete of a version 1 claim: %+v, %v", rec, err)
	}
	res, err = s.Claim(bg, "released", store.ClaimRequest{Owner: "b", Lease: time.Minute, TTL: time.Hour})
	if err != nil || res.Status != store.Claimed || res.Takeover || res.Attempt != 1 || res.Token.Fence <= 9 {
		t.Fatalf("claim of a released version 1 row: %+v, %v; want attempt 1, a fence above 9", res, err)
	}
	res, err = s.Claim(bg, "done", store.ClaimRequest{Owner: "b", Lease: time.Minute, TTL: time.Hour})
	if err != nil || res.Status != store.Completed || string(res.Record.Value) != `"v"` || res.Record.Token != (store.Token{Fence: 7, Owner: "o"}) {
		t.Fatalf("claim of a version 1 result: %+v, %v", res, err)
	}
	if err := s.Forget(bg, "done"); err != nil {
		t.Fatal(err)
	}
	res, err = s.Claim(bg, "done", store.ClaimRequest{Owner: "c", Lease: time.Minute, TTL: time.Hour})
	if err != nil || res.Status != store.Claimed || res.Attempt != 1 || res.Token.Fence <= 7 {
		t.Fatalf("claim after the Forget: %+v, %v", res, err)
	}
	if err := s.Migrate(bg); err != nil {
		t.Fatalf("Migrate again: %v", err)
	}
}

func ptr(s string) *string { return &s }

func bytesOf(s *string) []byte {
	if s == nil {
		return nil
	}
	return []byte(*s)
}
