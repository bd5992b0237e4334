package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/idemrt/idem/store"
)

// oddKeys hold the bytes that a store's own naming or matching could take
// for syntax: separators, escapes, glob characters, braces (Redis hash
// tags), control bytes and invalid UTF-8.
var oddKeys = []string{
	"a:b", "a", "a:b:", "a%3Ab", "a%", "%", "a*", "a*b", "*", "a?", "?", "a[b]", "[", "]", `a\`, `\`, `a\*`,
	"{tag}", "a{b}", "}{", "{", "}", "ключ", "emoji-🔑", "sp ace", "new\nline", "\x01", "\xff\xfe", "a\xff",
	store.BuildKey("1", store.Scope{Namespace: "a:b"}), store.BuildKey("b:1", store.Scope{Namespace: "a"}),
}

// scanner returns st as a store.Scanner, or skips the test.
func scanner(t *testing.T, st store.Store) store.Scanner {
	t.Helper()
	sc, ok := st.(store.Scanner)
	if !ok {
		t.Skip("the store does not implement store.Scanner")
	}
	return sc
}

// scanAll pages through the keys starting with prefix and returns them
// with how many times each came back. It fails the test on a key outside
// the prefix.
func scanAll(t *testing.T, sc store.Scanner, prefix string, limit int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	cursor := ""
	for pages := 0; ; pages++ {
		if pages == 1_000_000 {
			t.Fatalf("Scan(%q, limit %d) has not ended after %d pages", prefix, limit, pages)
		}
		keys, next, err := sc.Scan(ctx, prefix, cursor, limit)
		if err != nil {
			t.Fatalf("Scan(%q, %q, %d): %v", prefix, cursor, limit, err)
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, prefix) {
				t.Fatalf("Scan(%q) returned %q, outside the prefix", prefix, k)
			}
			seen[k]++
		}
		if next == "" {
			return seen
		}
		cursor = next
	}
}

// wantKeys fails the test unless got holds exactly want (each at least
// once).
func wantKeys(t *testing.T, what string, got map[string]int, want []string) {
	t.Helper()
	var missing, extra []string
	for _, k := range want {
		if got[k] == 0 {
			missing = append(missing, k)
		}
	}
	for k := range got {
		if !slices.Contains(want, k) {
			extra = append(extra, k)
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		t.Fatalf("%s: missing %q, unexpected %q", what, missing, extra)
	}
}

func withPrefix(keys []string, prefix string) []string {
	var out []string
	for _, k := range keys {
		if strings.HasPrefix(k, prefix) {
			out = append(out, k)
		}
	}
	return out
}

// Scan of an empty store ends with no key, whatever the prefix.
func (s *suite) scanEmpty(t *testing.T) {
	sc := scanner(t, s.h.New(t))
	for _, prefix := range []string{"", "a", "*"} {
		wantKeys(t, fmt.Sprintf("Scan(%q) of an empty store", prefix), scanAll(t, sc, prefix, 10), nil)
	}
	_, _, err := sc.Scan(ctx, "", "", 0)
	wantErr(t, "Scan with limit 0", err, store.ErrInvalidArgument)
	_, _, err = sc.Scan(ctx, "", "", -1)
	wantErr(t, "Scan with limit -1", err, store.ErrInvalidArgument)
}

// Scan of a prefix returns every key of the prefix, held or done, and none
// outside it, over pages of any size: glob characters, escapes and braces
// in a prefix are plain bytes.
func (s *suite) scanPrefixes(t *testing.T) {
	st := s.h.New(t)
	sc := scanner(t, st)
	keys := slices.Clone(oddKeys)
	for i := range 30 {
		keys = append(keys, fmt.Sprint("orders:", i), fmt.Sprint("a*b:", i))
	}
	keys = append(keys, "orders", "order", "Orders:1", "orders:\x01", "users:1")
	for i, k := range keys {
		tok := s.mustClaim(t, st, k, "o", s.long())
		if i%3 == 0 { // some done, some failed, the rest held
			if _, err := st.Complete(ctx, k, tok, store.Record{Value: []byte("v"), Failed: i%2 == 0, Error: "e"}, s.long()); err != nil {
				t.Fatal(err)
			}
		}
	}
	prefixes := []string{"", "orders:", "orders", "orders:1", "a", "a*", "a*b", "a?", "a[", "a[b]", "[", "]", `a\`, `\`,
		"*", "?", "%", "a%", "a%3A", "{", "}", "a{", "{tag", "a:", "\x01", "\xff", "ключ", "none", "orders:\x01"}
	for _, prefix := range prefixes {
		for _, limit := range []int{1, 7, 1000} {
			if limit == 1 && len(withPrefix(keys, prefix)) < 3 && prefix != "" {
				continue // limit 1 is covered by the larger prefixes
			}
			got := scanAll(t, sc, prefix, limit)
			wantKeys(t, fmt.Sprintf("Scan(%q, limit %d)", prefix, limit), got, withPrefix(keys, prefix))
		}
	}
}

// Scan leaves out keys forgotten or expired before it starts; keys present
// for the whole scan come back even when others come and go between its
// pages.
func (s *suite) scanChanges(t *testing.T) {
	st := s.h.New(t)
	sc := scanner(t, st)
	var stay []string
	for i := range 40 {
		k := fmt.Sprint("k:", i)
		tok := s.mustClaim(t, st, k, "o", s.long())
		if _, err := st.Complete(ctx, k, tok, store.Record{Value: []byte("v")}, s.long()); err != nil {
			t.Fatal(err)
		}
		if i%4 != 0 {
			stay = append(stay, k)
		}
	}
	for i := 0; i < 40; i += 4 {
		if err := st.Forget(ctx, fmt.Sprint("k:", i)); err != nil {
			t.Fatal(err)
		}
	}
	tok := s.mustClaim(t, st, "k:short", "o", s.long())
	if _, err := st.Complete(ctx, "k:short", tok, store.Record{}, s.short()); err != nil {
		t.Fatal(err)
	}
	s.expire(t)
	wantKeys(t, "Scan after Forget and expiry", scanAll(t, sc, "k:", 5), stay)

	// Keys come and go between the pages of one scan.
	seen := map[string]int{}
	cursor := ""
	for page := 0; ; page++ {
		keys, next, err := sc.Scan(ctx, "k:", cursor, 5)
		if err != nil {
			t.Fatal(err)
		}
		for _, k := range keys {
			seen[k]++
		}
		if page < 100 { // one key comes, the one before goes
			add := fmt.Sprint("k:new:", page)
			tok := s.mustClaim(t, st, add, "o", s.long())
			if _, err := st.Complete(ctx, add, tok, store.Record{}, s.long()); err != nil {
				t.Fatal(err)
			}
			if err := st.Forget(ctx, fmt.Sprint("k:new:", page-1)); err != nil {
				t.Fatal(err)
			}
		}
		if next == "" {
			break
		}
		cursor = next
	}
	for _, k := range stay {
		if seen[k] == 0 {
			t.Fatalf("key %q, present for the whole scan, was not returned", k)
		}
	}
}
