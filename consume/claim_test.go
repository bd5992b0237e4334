package consume_test

import (
	"context"
	"strings"
	"testing"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
)

// A message handler holds the claim of the message's scoped key.
func TestHandlerSeesItsClaim(t *testing.T) {
	c := newConsumer(t, idem.Options{}, consume.Options{})
	var cl idem.Claim
	var ok bool
	_, v := consume.Handle(context.Background(), c, consume.Delivery{Scope: "ORDERS/shipper", Key: "msg-1", Attempt: 1},
		func(ctx context.Context) (string, error) {
			cl, ok = idem.ClaimFrom(ctx)
			return "ok", nil
		})
	if v.Err != nil {
		t.Fatal(v.Err)
	}
	if !ok || cl.Fence == 0 || cl.Attempt != 1 || !strings.Contains(cl.Key, "msg-1") {
		t.Fatalf("handler claim = %+v (%v)", cl, ok)
	}
}
