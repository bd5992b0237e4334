package redisstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idemrt/idem/internal/redistest"
	"github.com/idemrt/idem/store"
	"github.com/idemrt/idem/store/redisstore"
)

// With Options.Scope, a claim's key must fit store.MaxKeyLen with the
// scope's prefix: the longest key Store.MaxKeyLen allows is claimed and
// reached by a store without the scope (as the admin command opens it);
// one byte more is ErrInvalidKey, and nothing is stored.
func TestScopedKeyFitsTheLimit(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	scope := store.Scope{Namespace: "acme", Version: "v1"}
	scoped, err := redisstore.New(bg, c, redisstore.Options{KeyPrefix: "kl:", Scope: scope})
	if err != nil {
		t.Fatal(err)
	}
	defer scoped.Close()
	plain := newStoreWithPrefix(t, c, "kl:")
	n := scoped.MaxKeyLen()
	if want := store.MaxKeyLen - len(store.BuildKey("", scope)); n != want {
		t.Fatalf("MaxKeyLen = %d, want %d", n, want)
	}
	if _, err := scoped.Claim(bg, strings.Repeat("x", n+1), claimReq("a")); !errors.Is(err, store.ErrInvalidKey) {
		t.Fatalf("claim of a key one byte too long: %v, want ErrInvalidKey", err)
	}
	key := strings.Repeat("y", n)
	res, err := scoped.Claim(bg, key, claimReq("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := scoped.Complete(bg, key, res.Token, store.Record{Value: []byte("v")}, time.Hour); err != nil {
		t.Fatal(err)
	}
	keys, _ := scanAllKeys(t, plain, "")
	if len(keys) != 1 || keys[0] != store.BuildKey(key, scope) {
		t.Fatalf("the unscoped store lists %d keys, want the scoped one", len(keys))
	}
	if e, err := plain.Inspect(bg, keys[0]); err != nil || e.State != store.Done {
		t.Fatalf("the unscoped store reads %v %v", e.State, err)
	}
	if err := store.ValidateKey(keys[0]); err != nil {
		t.Fatalf("the stored key: %v", err)
	}
}

// A record stored under a key longer than store.MaxKeyLen (as a version
// that checked keys without their scope stored it) is listed and can be
// forgotten, so a Clear deletes it; reads refuse its key, as the store
// contract wants, and so does a claim.
func TestOverLongStoredKeyIsForgotten(t *testing.T) {
	srv := redistest.Start(t, redistest.Options{})
	c := newClient(t, srv)
	s := newStoreWithPrefix(t, c, "ol:")
	res, err := s.Claim(bg, "short", claimReq("a"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Complete(bg, "short", res.Token, store.Record{Value: []byte("v")}, time.Hour); err != nil {
		t.Fatal(err)
	}
	long := store.BuildKey(strings.Repeat("z", store.MaxKeyLen), store.Scope{Namespace: "acme", Version: "v1"})
	if err := c.Copy(bg, s.RecordKey("short"), s.RecordKey(long), 0, false).Err(); err != nil {
		t.Fatal(err)
	}
	keys, _ := scanAllKeys(t, s, "ff:")
	if len(keys) != 1 || keys[0] != long {
		t.Fatalf("scan lists %d keys, want the long one", len(keys))
	}
	if _, err := s.Inspect(bg, long); !errors.Is(err, store.ErrInvalidKey) {
		t.Fatalf("inspect of the long key: %v, want ErrInvalidKey", err)
	}
	if err := s.Forget(bg, long); err != nil {
		t.Fatal(err)
	}
	if n, err := c.Exists(bg, s.RecordKey(long)).Result(); err != nil || n != 0 {
		t.Fatalf("the long key's record is still there: %d %v", n, err)
	}
	if _, err := s.Claim(bg, long, claimReq("a")); !errors.Is(err, store.ErrInvalidKey) {
		t.Fatalf("a claim of the long key: %v, want ErrInvalidKey", err)
	}
}

func scanAllKeys(t *testing.T, s *redisstore.Store, prefix string) ([]string, int) {
	t.Helper()
	var keys []string
	pages, cursor := 0, ""
	for {
		page, next, err := s.Scan(bg, prefix, cursor, 100)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		keys = append(keys, page...)
		if next == "" {
			return keys, pages
		}
		cursor = next
	}
}
