package consume_test

import (
	"strings"
	"testing"

	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
)

// ParseKey gives back the scope and key Key was given, for every scope
// (escapes and digest marks among them), and refuses what Key cannot build.
func TestParseKeyRoundTrip(t *testing.T) {
	for _, scope := range []string{"", "s", "a:b", "100%", "%3A", "x%sha256", "ORDERS/billing"} {
		for _, key := range []string{"k", "with:colons", strings.Repeat("z", 1500), "nul\x00"} {
			k, err := consume.Key(scope, key)
			if err != nil {
				t.Fatal(err)
			}
			p, ok := consume.ParseKey(k)
			digest := len(key) > 1000 || strings.Contains(key, "\x00")
			if !ok || p.Scope != scope || p.Digest != digest || (!digest && p.Key != key) {
				t.Errorf("Key(%q, %.20q) = %.60q read as %+v %v", scope, key, k, p, ok)
			}
		}
	}
	// natsjs reads "<stream>/<consumer>" scopes only: not an SQS queue's URL.
	url, _ := consume.Key("https://sqs.eu-west-1.amazonaws.com/123/orders", "m-1")
	if p, ok := natsjs.ParseKey(url); ok {
		t.Errorf("natsjs.ParseKey(%q) = %+v", url, p)
	}
	if p, ok := natsjs.ParseKey("consume:ORDERS/billing:m-1"); !ok || p.Stream != "ORDERS" || p.Consumer != "billing" || p.Key != "m-1" {
		t.Errorf("natsjs.ParseKey: %+v %v", p, ok)
	}
	for _, k := range []string{"consume:", "consume:scope", "consume:a%zz:k", "consume:s:", "other:s:k"} {
		if p, ok := consume.ParseKey(k); ok {
			t.Errorf("%q read as %+v", k, p)
		}
	}
}
