package pgstore_test

import (
	"os"
	"strings"
	"testing"

	"github.com/idemrt/idem/store/pgstore"
)

// docs/postgres.md prints the schema, for teams that run their own
// migrations: it must be the SQL that Migrate runs.
func TestDocsPrintTheSchema(t *testing.T) {
	doc, err := os.ReadFile("../../docs/postgres.md")
	if err != nil {
		t.Fatal(err)
	}
	sql, err := pgstore.SchemaSQL(pgstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(doc), sql) {
		t.Fatalf("docs/postgres.md does not hold the schema of this version:\n%s", sql)
	}
}
