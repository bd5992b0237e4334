package main

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	idemrt "github.com/idemrt/idem"
	"github.com/idemrt/idem/consume"
	"github.com/idemrt/idem/httpidem"
	"github.com/idemrt/idem/internal/idemtest"
)

// checkFrontEnds stores an HTTP response through httpidem and a consumer's
// result under consume.Key, then checks how get, state and list show them:
// the response as status, headers (sensitive ones redacted) and body (cut
// past 4 KiB unless -full), the consumer's key by stream and consumer.
func checkFrontEnds(t *testing.T, sc storeCase) {
	rt := idemtest.Runtime(t, idemrt.Options{Store: sc.st})
	mw, err := httpidem.New(httpidem.Options{Runtime: rt, Tenant: func(*http.Request) string { return "acme" }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mw.Close(bg) })
	body := strings.Repeat("b", 5000) + "END"
	h := mw.Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("Set-Cookie", "session=s3cr3t")
		w.Header().Set("X-Upstream-Token", "t0k3n")
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, body)
	}))
	req := httptest.NewRequest("POST", "/pay", strings.NewReader("x"))
	req.Header.Set("Idempotency-Key", "pay-1")
	h.ServeHTTP(httptest.NewRecorder(), req)

	httpKey := []string{"-namespace", "acme", "-version", "http"}
	r := sc.idem(t, append(httpKey, "get", "pay-1")...).want(t, exitOK)
	for _, want := range []string{"HTTP response 201 Created\n", "Content-Type: text/plain\n", "Set-Cookie: [redacted, 14 B]\n",
		"X-Upstream-Token: [redacted, 5 B]\n", "\n\nbbbb"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("get of an HTTP response lacks %q:\n%.300s", want, r.out)
		}
	}
	if strings.Contains(r.out, "s3cr3t") || strings.Contains(r.out, "t0k3n") || strings.Contains(r.out, "END") ||
		!strings.Contains(r.err, "pass -full") {
		t.Errorf("get of an HTTP response shows a secret, or its whole body: stderr %q", r.err)
	}
	r = sc.idem(t, append(httpKey, "get", "-full", "pay-1")...).want(t, exitOK)
	if !strings.Contains(r.out, "END\n") || strings.Contains(r.out, "s3cr3t") {
		t.Errorf("get -full: %.100s...", r.out)
	}
	var rep keyReport
	sc.idem(t, append(httpKey, "-json", "get", "pay-1")...).want(t, exitOK).decode(t, &rep)
	if rep.HTTP == nil || rep.HTTP.Status != 201 || !rep.HTTP.BodyCut || rep.HTTP.BodyBytes != len(body) ||
		rep.HTTP.Header.Get("Set-Cookie") != "[redacted, 14 B]" || rep.Value != nil {
		t.Errorf("get -json of an HTTP response: %+v", rep)
	}

	key, err := consume.Key("ORDERS/billing", "order-7")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := idemrt.Do(bg, rt, key, idemtest.Value("shipped")); err != nil {
		t.Fatal(err)
	}
	r = sc.idem(t, "state", key).want(t, exitOK)
	if !strings.Contains(r.out, "consumer     stream/topic ORDERS, consumer/group billing, message key order-7\n") {
		t.Errorf("state of a consumer's key:\n%s", r.out)
	}
	r = sc.idem(t, "-key-prefix", "consume:", "list").want(t, exitOK)
	if !strings.HasPrefix(r.out, "completed     consume:ORDERS/billing:order-7  (stream/topic ORDERS, consumer/group billing, message key order-7)  expires in ") {
		t.Errorf("list of a consumer's key: %q", r.out)
	}
}
