package pgstore

import (
	"errors"
	"fmt"

	"github.com/idemrt/idem/internal/keytext"
	"github.com/idemrt/idem/store"
)

// CorruptError reports a row the store cannot read: a state it does not
// know, a field missing or out of range (written by hand, or by something
// other than this package). No operation answers from such a row or
// writes to it, but for two deletes: Forget deletes it if its state says
// completed, and cleanup once its end has passed. It matches
// [store.ErrCorrupt] (errors.Is).
type CorruptError struct {
	Key    string // the key as given to the store
	Table  string // the table, as in Store.Table
	Reason string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("pgstore: the row of key %s in table %s is corrupt: %s", keytext.Quote(e.Key), e.Table, e.Reason)
}

// Is reports whether target is [store.ErrCorrupt].
func (e *CorruptError) Is(target error) bool { return target == store.ErrCorrupt }

// errUnsettled is an op's error when the row kept changing between the
// statement's read and its write for every try (see call.settled).
var errUnsettled = errors.New("the row changed under every try of the statement")
