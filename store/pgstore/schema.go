package pgstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// One row per key:
//
//	key          the key as given to the store (bytea: any bytes)
//	state        p (in progress), c (completed), f (permanent error), r (released)
//	fence        the fence of the claim that holds, produced or gave back
//	             the row: a claim that creates the key's record takes the
//	             database clock's floor (internal/fence, FLOOR in sql.go),
//	             or the row's fence + 1 if larger (a row released or ended
//	             still counts); a takeover the fence + 1, or the floor
//	owner        the owner of that claim
//	attempt      the claims of the record (p): 1 for the claim that created
//	             it, one more for each takeover (schema version 2; rows of
//	             version 1 read as 1)
//	lease_until  when the holder's lease ends (p)
//	fingerprint  the holder's fingerprint (p), the request's (c, f)
//	result       the encoded value (c) or the error message (f)
//	created_at   when the key completed (c, f)
//	expires_at   when the row ends: a completed key's TTL, a claim's lease
//	             and TTL; after it the row is absent to every operation,
//	             and cleanup deletes it
//	waiters      the channels of the instances waiting for the key to
//	             settle, notified when it completes or is released
//
// and, in the table <table>_live (schema version 3), one row per instance
// that beats (store.Liveness): instance, and live_until, when its last
// beat ends by the database clock.
//
// A released row stays until its end, and an ended one until cleanup;
// the next claim's fence is above theirs. Times come from the database
// clock.

// migrations are the schema's versions: applying migrations[v] takes a
// table from version v to v+1. The version lives in the table's comment.
// Add a migration (never change one) to change the schema.
var migrations = []string{
	`CREATE TABLE {T} (
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
CREATE INDEX {I} ON {T} (expires_at);`,
	// 2: the attempt of a claim (ClaimResult.Attempt). Rows of version 1
	// read as attempt 1. A column with a constant default is added
	// without rewriting the table (PostgreSQL 11 and later).
	`ALTER TABLE {T} ADD COLUMN attempt integer NOT NULL DEFAULT 1;`,
	// 3: the liveness records of instances (store.Liveness, liveness.go),
	// one row per instance, in a table of their own.
	`CREATE TABLE IF NOT EXISTS {L} (
    instance   text        PRIMARY KEY,
    live_until timestamptz NOT NULL
);`,
}

// schemaVersion is the version this package reads and writes.
var schemaVersion = len(migrations)

const versionComment = "idem pgstore schema "

func parseVersion(comment string) (int, bool) {
	s, ok := strings.CutPrefix(comment, versionComment)
	if !ok {
		return 0, false
	}
	v, err := strconv.Atoi(s)
	return v, err == nil && v > 0
}

// expand writes the names into a migration.
func (n names) expand(sql string) string {
	return strings.NewReplacer("{T}", n.table, "{I}", n.index, "{L}", n.live).Replace(sql)
}

// SchemaSQL returns the SQL that creates the table of opts (its Schema and
// Table) at the schema version of this package, for teams that run their
// own migrations: the statements Migrate runs on a database without the
// table, the version comment included. Migrate upgrades a table so
// created, as long as the comment stays.
func SchemaSQL(opts Options) (string, error) {
	n, err := newNames(opts.Schema, opts.Table)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	if n.schema != "" {
		fmt.Fprintf(&b, "CREATE SCHEMA IF NOT EXISTS %s;\n", n.schema)
	}
	for _, m := range migrations {
		b.WriteString(n.expand(m))
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "COMMENT ON TABLE %s IS '%s%d';\n", n.table, versionComment, schemaVersion)
	return b.String(), nil
}

// Migrate creates the table (and Options.Schema, if missing), or upgrades
// it to this package's schema version, in one transaction. It is
// idempotent, and safe to run from many instances at once: they take turns
// under an advisory lock. A table of that name that pgstore did not create
// (no version comment), or of a newer version, is an error, and left alone.
func (s *Store) Migrate(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext($1))`, "idem pgstore migrate "+s.names.table); err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	if s.names.schema != "" {
		if _, err := tx.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+s.names.schema); err != nil {
			return fmt.Errorf("pgstore: migrate: create schema %s: %w", s.names.schema, err)
		}
	}
	var exists bool
	var comment *string
	err = tx.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL, obj_description(to_regclass($1), 'pg_class')`,
		s.names.table).Scan(&exists, &comment)
	if err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	version := 0
	if exists {
		v, ok := 0, false
		if comment != nil {
			v, ok = parseVersion(*comment)
		}
		if !ok {
			return fmt.Errorf("pgstore: migrate: table %s exists, but pgstore did not create it (its comment names no schema version): choose another Options.Table", s.names.table)
		}
		version = v
	}
	if version > schemaVersion {
		return fmt.Errorf("pgstore: migrate: table %s is at schema version %d, newer than this package's %d", s.names.table, version, schemaVersion)
	}
	if version == schemaVersion {
		return nil
	}
	for _, m := range migrations[version:] {
		if _, err := tx.Exec(ctx, s.names.expand(m)); err != nil {
			return fmt.Errorf("pgstore: migrate %s to version %d: %w", s.names.table, schemaVersion, err)
		}
	}
	comment2 := fmt.Sprintf("COMMENT ON TABLE %s IS '%s%d'", s.names.table, versionComment, schemaVersion)
	if _, err := tx.Exec(ctx, comment2); err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: migrate: %w", err)
	}
	return nil
}
