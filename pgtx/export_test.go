package pgtx

import (
	"weak"

	"github.com/idemrt/idem/store/pgstore"
)

// SetAfterStatement sets a function that runs right after the completion
// statement, before COMMIT: the process tests stop a child there.
func SetAfterStatement(f func()) { afterStatement = f }

// Remembers reports whether pgtx remembers a checked address of the store
// w points to.
func Remembers(w weak.Pointer[pgstore.Store]) bool {
	_, ok := sameDB.Load(w)
	return ok
}
