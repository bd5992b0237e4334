package natsjs_test

import (
	"fmt"

	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/consume/natsjs"
)

// The key of a message delivered to consumer "billing" of stream
// "ORDERS", read back.
func ExampleParseKey() {
	k, _ := consume.Key("ORDERS/billing", "order-7")
	p, ok := natsjs.ParseKey(k)
	fmt.Println(k)
	fmt.Println(p.Stream, p.Consumer, p.Key, ok)
	// Output:
	// consume:ORDERS/billing:order-7
	// ORDERS billing order-7 true
}
