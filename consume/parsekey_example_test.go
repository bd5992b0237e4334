package consume_test

import (
	"fmt"
	"strings"

	"github.com/idemrt/idem/consume"
)

// ParseKey reads back what Key built, digest keys too.
func ExampleParseKey() {
	k, _ := consume.Key("orders:eu", "msg-1")
	p, ok := consume.ParseKey(k)
	fmt.Println(k, "->", p.Scope, p.Key, p.Digest, ok)

	long, _ := consume.Key("orders", strings.Repeat("x", 2000))
	p, ok = consume.ParseKey(long)
	fmt.Println(p.Scope, len(p.Key), p.Digest, ok)

	_, ok = consume.ParseKey("ff:idemp:acme:v1:order-1")
	fmt.Println(ok)
	// Output:
	// consume:orders%3Aeu:msg-1 -> orders:eu msg-1 false true
	// orders 64 true true
	// false
}
