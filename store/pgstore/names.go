package pgstore

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"

	"github.com/idemrt/idem/store"
)

// maxIdent is PostgreSQL's longest identifier in bytes (NAMEDATALEN - 1).
// A longer one is cut short without an error, so the store refuses it.
const maxIdent = 63

// indexSuffix ends the name of the table's index on expires_at.
const indexSuffix = "_expires_at"

// liveSuffix names the liveness table after the keys' table (shorter than
// indexSuffix, so the length check of Table covers it).
const liveSuffix = "_live"

// names are the table's SQL names, quoted.
type names struct {
	schema string // "" without a schema
	table  string // schema-qualified when there is a schema
	index  string // the index on expires_at, unqualified: it lives in the table's schema
	live   string // the liveness table (liveness.go), schema-qualified like table
	// bare is the table's own name, unquoted.
	bare string
}

// newNames quotes schema and table with pgx.Identifier, so that any
// character but NUL stays part of the name (case, dots, quotes, spaces),
// and refuses names PostgreSQL cannot hold.
func newNames(schema, table string) (names, error) {
	if table == "" {
		table = defaultTable
	}
	if err := checkIdent("Table", table, maxIdent-len(indexSuffix)); err != nil {
		return names{}, err
	}
	n := names{bare: table, index: pgx.Identifier{table + indexSuffix}.Sanitize()}
	if schema == "" {
		n.table = pgx.Identifier{table}.Sanitize()
		n.live = pgx.Identifier{table + liveSuffix}.Sanitize()
		return n, nil
	}
	if err := checkIdent("Schema", schema, maxIdent); err != nil {
		return names{}, err
	}
	n.schema = pgx.Identifier{schema}.Sanitize()
	n.table = pgx.Identifier{schema, table}.Sanitize()
	n.live = pgx.Identifier{schema, table + liveSuffix}.Sanitize()
	return n, nil
}

func checkIdent(what, name string, most int) error {
	switch {
	case strings.IndexByte(name, 0) >= 0:
		return fmt.Errorf("%w: pgstore: %s %q holds a NUL byte", store.ErrInvalidArgument, what, name)
	case !utf8.ValidString(name):
		return fmt.Errorf("%w: pgstore: %s %q is not valid UTF-8", store.ErrInvalidArgument, what, name)
	case len(name) > most:
		return fmt.Errorf("%w: pgstore: %s %q is %d bytes, longer than %d", store.ErrInvalidArgument, what, name, len(name), most)
	case strings.TrimSpace(name) == "":
		return fmt.Errorf("%w: pgstore: %s %q is blank", store.ErrInvalidArgument, what, name)
	}
	return nil
}
