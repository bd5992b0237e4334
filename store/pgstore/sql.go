package pgstore

import (
	"fmt"
	"strings"

	"github.com/idemrt/idem/internal/fence"
)

// The statements share these conventions.
//
// Parameters come in through the CTE p, typed there once, with now: the
// database clock, read once per statement (clock_timestamp() in a
// materialized CTE), so that every condition and every new time of the
// statement uses the same instant, and a statement late in a batch does not
// use the batch's start (now() is the transaction's). Durations arrive as
// microseconds, rounded up. A claim's p also holds floor, the lowest fence
// of a claim that creates a record at now: the microseconds since
// 2025-01-01 UTC (internal/fence), from the same clock.
//
// A row whose expires_at has passed is absent to every statement: a claim
// takes it as a new record (attempt 1, its fence still grows), the others
// ignore it, and cleanup deletes it.
//
// Every statement returns the same columns (see cols and row): up to two
// rows, one with via 'w' for the row as the statement wrote it, and one
// with via 's' for the row as the statement's snapshot saw it before. When
// the write did not happen, the answer comes from the snapshot row, but
// only if the snapshot explains why: under READ COMMITTED, a write locks
// and rechecks the newest version of the row, which may be newer than the
// snapshot (another transaction committed in between). A snapshot that
// says the write should have happened (the token held the key, or the key
// was free) means the row changed in that instant; the statement wrote
// nothing, and the store sends it again, when a new snapshot sees the
// change (call.settled). A statement never answers from a snapshot that
// contradicts what it did.
//
// The claim. A claim that finds the key completed, its own, or in progress
// with its waiter already listed (or none asked for) writes nothing: it
// answers from the snapshot (quiet), so a replay takes no lock and writes
// no WAL. A claim that must add its waiter to a key in progress updates
// waiters (enl). Every other claim inserts, and ON CONFLICT DO UPDATE takes
// the row over when its WHERE says the key is free: released, ended, or
// held under a lease that ended by another owner. When that WHERE is false
// (the row became live since the snapshot), ON CONFLICT returns no row,
// and neither does a SELECT in the same statement show the row (it reads
// the statement's snapshot, from before the row's commit): the claim is
// sent again, and its next snapshot sees the row. The three paths depend
// on the snapshot alone, so at most one of ins and enl writes, and never
// the same row twice (which ON CONFLICT refuses).

// cols are the columns of a row in every statement's result, after via.
const cols = "state, fence, owner, fingerprint, result, lease_until, created_at, expires_at, attempt"

// prefixed returns cols with each column qualified by alias.
func prefixed(alias string) string {
	parts := strings.Split(cols, ", ")
	for i, c := range parts {
		parts[i] = alias + "." + c
	}
	return strings.Join(parts, ", ")
}

// claimSQL: $1 key, $2 owner, $3 lease µs, $4 how long the row lives µs
// (the lease, then the TTL: a takeover after the lease always finds the
// row, and counts one more attempt), $5 fingerprint, $6 waiter channel (”
// for none), $7 the holder the caller found dead (NULL for none: a row in
// progress under exactly that owner is taken as if its lease had ended;
// see liveness.go).
const claimSQL = `WITH p AS MATERIALIZED (
  SELECT $1::bytea AS key, $2::bytea AS owner, $3::bigint * interval '1 microsecond' AS lease,
    $4::bigint * interval '1 microsecond' AS keep, $5::bytea AS fp, $6::text AS waiter,
    $7::bytea AS dead, c.now, {FLOOR} AS floor
  FROM (SELECT clock_timestamp() AS now) c),
cur AS (
  SELECT r.*,
    r.expires_at > p.now AND (r.state IN ('c', 'f') OR r.state = 'p' AND (r.owner = p.owner
      OR r.lease_until > p.now AND r.owner IS DISTINCT FROM p.dead
        AND (p.waiter = '' OR p.waiter = ANY (r.waiters)))) AS quiet,
    r.expires_at > p.now AND r.state = 'p' AND r.owner <> p.owner AND r.lease_until > p.now
      AND r.owner IS DISTINCT FROM p.dead
      AND p.waiter <> '' AND NOT p.waiter = ANY (coalesce(r.waiters, '{}')) AS enlist
  FROM {T} r, p WHERE r.key = p.key),
ins AS (
  INSERT INTO {T} AS r (key, state, fence, owner, lease_until, fingerprint, expires_at, waiters, attempt)
  SELECT p.key, 'p', p.floor, p.owner, p.now + p.lease, p.fp, p.now + p.keep, '{}', 1 FROM p
  WHERE NOT EXISTS (SELECT FROM cur WHERE cur.quiet OR cur.enlist)
  ON CONFLICT (key) DO UPDATE SET state = 'p', fence = greatest(r.fence + 1, excluded.fence), owner = excluded.owner,
    lease_until = excluded.lease_until, fingerprint = excluded.fingerprint, result = NULL,
    created_at = NULL, expires_at = greatest(r.expires_at, excluded.expires_at),
    waiters = CASE WHEN r.state = 'p' AND r.expires_at > (SELECT now FROM p) THEN r.waiters ELSE '{}' END,
    attempt = CASE WHEN r.state = 'p' AND r.expires_at > (SELECT now FROM p) THEN least(r.attempt, 2147483646) + 1 ELSE 1 END
  WHERE r.expires_at <= (SELECT now FROM p) OR r.state = 'r'
    OR r.state = 'p' AND r.owner <> excluded.owner
      AND (r.lease_until <= (SELECT now FROM p) OR r.owner = (SELECT dead FROM p))
  RETURNING r.*),
enl AS (
  UPDATE {T} r SET waiters = array_append(coalesce(r.waiters, '{}'), p.waiter) FROM p
  WHERE r.key = p.key AND EXISTS (SELECT FROM cur WHERE cur.enlist)
    AND r.expires_at > p.now AND r.state = 'p' AND r.owner <> p.owner AND r.lease_until > p.now
    AND r.owner IS DISTINCT FROM p.dead AND NOT p.waiter = ANY (coalesce(r.waiters, '{}'))
  RETURNING r.*)
SELECT 'w', {ins}, p.now, false FROM ins, p
UNION ALL SELECT 'w', {enl}, p.now, false FROM enl, p
UNION ALL SELECT 's', {cur}, p.now, coalesce(cur.quiet, false) FROM cur, p`

// finishSQL completes (state c or f) or, with state r, releases the claim
// of a token, and notifies the waiters' channels with the key's digest.
// $1 key, $2 owner, $3 fence, $4 new state, $5 result, $6 fingerprint, $7
// TTL µs, $8 digest. A release keeps the row (and its end), so the next
// claim's fence is larger; a completion lives its TTL from now.
const finishSQL = `WITH p AS MATERIALIZED (
  SELECT $1::bytea AS key, $2::bytea AS owner, $3::bigint AS fence, $4::text AS state,
    $5::bytea AS res, $6::bytea AS fp, $7::bigint * interval '1 microsecond' AS ttl, $8::text AS digest,
    clock_timestamp() AS now),
cur AS (SELECT r.* FROM {T} r, p WHERE r.key = p.key),
upd AS (
  UPDATE {T} r SET state = p.state, lease_until = NULL,
    result = CASE WHEN p.state = 'r' THEN NULL ELSE coalesce(p.res, '') END,
    fingerprint = CASE WHEN p.state = 'r' THEN NULL ELSE p.fp END,
    created_at = CASE WHEN p.state = 'r' THEN NULL ELSE p.now END,
    expires_at = CASE WHEN p.state = 'r' THEN r.expires_at ELSE p.now + p.ttl END
  FROM p
  WHERE r.key = p.key AND r.state = 'p' AND r.owner = p.owner AND r.fence = p.fence AND r.expires_at > p.now
  RETURNING r.*),
woken AS (SELECT count(pg_notify(w, p.digest)) AS n FROM upd, p, unnest(upd.waiters) AS w)
SELECT 'w', {upd}, p.now, false FROM upd, p, woken
UNION ALL SELECT 's', {cur}, p.now, false FROM cur, p`

// renewSQL: $1 key, $2 owner, $3 fence, $4 lease µs. The row keeps
// outliving the lease by what its claim gave it past its lease (the TTL,
// or more): it ends no earlier than the new lease plus that margin.
const renewSQL = `WITH p AS MATERIALIZED (
  SELECT $1::bytea AS key, $2::bytea AS owner, $3::bigint AS fence,
    $4::bigint * interval '1 microsecond' AS lease, clock_timestamp() AS now),
cur AS (SELECT r.* FROM {T} r, p WHERE r.key = p.key),
upd AS (
  UPDATE {T} r SET lease_until = p.now + p.lease,
    expires_at = greatest(r.expires_at, p.now + p.lease + (r.expires_at - r.lease_until))
  FROM p
  WHERE r.key = p.key AND r.state = 'p' AND r.owner = p.owner AND r.fence = p.fence AND r.expires_at > p.now
  RETURNING r.*)
SELECT 'w', {upd}, p.now, false FROM upd, p
UNION ALL SELECT 's', {cur}, p.now, false FROM cur, p`

// getSQL reads the row of $1, in any state (Get and Inspect).
const getSQL = `WITH p AS MATERIALIZED (SELECT $1::bytea AS key, clock_timestamp() AS now)
SELECT 's', {r}, p.now, false FROM {T} r, p WHERE r.key = p.key`

// forgetSQL deletes the row of $1 if it is completed, or ended, and
// then NOTIFYs the invalidation channel $2 with payload $3 (delivered when
// the transaction commits: a listener's read finds the row gone).
const forgetSQL = `WITH p AS MATERIALIZED (SELECT $1::bytea AS key, clock_timestamp() AS now),
cur AS (SELECT r.* FROM {T} r, p WHERE r.key = p.key),
del AS (
  DELETE FROM {T} r USING p
  WHERE r.key = p.key AND (r.state IN ('c', 'f') OR r.expires_at <= p.now)
  RETURNING r.*),
told AS (SELECT count(pg_notify($2::text, $3::text)) AS n FROM del)
SELECT 'w', {del}, p.now, false FROM del, p, told
UNION ALL SELECT 's', {cur}, p.now, false FROM cur, p`

// cleanupSQL deletes up to $1 rows that have ended, oldest first, skipping
// rows that a transaction holds (it never waits, so it never deadlocks
// with a batch; a skipped row goes with a later batch).
const cleanupSQL = `DELETE FROM {T} WHERE key IN (
  SELECT key FROM {T} WHERE expires_at <= clock_timestamp()
  ORDER BY expires_at LIMIT $1 FOR UPDATE SKIP LOCKED)`

// scanSQL lists up to $4 keys after $1 (none: from the start) in [$2, $3)
// ($3 null: no end), in key order, leaving out rows released or ended.
const scanSQL = `SELECT key FROM {T}
WHERE ($1::bytea IS NULL OR key > $1) AND key >= coalesce($2::bytea, '') AND ($3::bytea IS NULL OR key < $3)
  AND state <> 'r' AND expires_at > clock_timestamp()
ORDER BY key LIMIT $4`

// queries are the statements of one table.
type queries struct {
	claim, finish, renew, get, getLocked, forget, cleanup, scan string
}

// floorSQL is fence.Floor of c.now in SQL: the whole microseconds since
// 2025-01-01 UTC (extract gives a numeric, exact to the microsecond), at
// least 1, at most 2^53.
var floorSQL = fmt.Sprintf("least(greatest(floor((extract(epoch FROM c.now) - %d) * 1000000), 1), %d)::bigint",
	fence.EpochUnix, uint64(fence.Max))

func buildQueries(table string) queries {
	r := strings.NewReplacer("{T}", table, "{FLOOR}", floorSQL,
		"{ins}", prefixed("ins"), "{enl}", prefixed("enl"), "{cur}", prefixed("cur"),
		"{upd}", prefixed("upd"), "{del}", prefixed("del"), "{r}", prefixed("r"))
	return queries{
		claim:  r.Replace(claimSQL),
		finish: r.Replace(finishSQL),
		renew:  r.Replace(renewSQL),
		get:    r.Replace(getSQL),
		// getLocked waits for a transaction holding the row (CompletedBy).
		getLocked: r.Replace(getSQL) + " FOR SHARE OF r",
		forget:    r.Replace(forgetSQL),
		cleanup:   r.Replace(cleanupSQL),
		scan:      r.Replace(scanSQL),
	}
}
