package redisstore_test

import (
	"net"
	"sync"
	"testing"
)

// proxy listens on a free loopback port and, for each connection to it,
// dials target and hands both ends to serve, which moves the bytes (each
// test's proxy moves them its own way). Every connection is closed when
// the test ends.
func proxy(t *testing.T, target string, serve func(client, server net.Conn)) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var open []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range open {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			mu.Lock()
			open = append(open, c, u)
			mu.Unlock()
			serve(c, u)
		}
	}()
	return ln
}
