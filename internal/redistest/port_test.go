package redistest

import (
	"bufio"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
)

// A server whose port another server took between freePort and its start
// (another test, or another test binary, picked the same free port) must not
// count as started because the other one answers on that port: the test
// would share, kill, pause or restart another test's server. It exits (the
// port is in use) and start reports the failure, so Start tries another
// port.
func TestStartOnATakenPort(t *testing.T) {
	other := Start(t, Options{})
	if _, err := Command(other.Addr, "SET", "owner", "other"); err != nil {
		t.Fatal(err)
	}
	s := newServer(t, Binary(t), other.Port, Options{})
	err := s.start()
	t.Cleanup(s.cleanup)
	if err == nil {
		t.Fatalf("start on port %d, taken by another server: no error; this test would use the other server", other.Port)
	}
	if got, err := Command(other.Addr, "GET", "owner"); err != nil || got != "other" {
		t.Fatalf("the other server: %q %v", got, err)
	}
}

// A restarted server answers while it still loads its data set (INFO, and
// every other command with a LOADING error; Redis serves clients every 1024
// commands it loads): it is ready when it serves.
func TestRestartWaitsForTheDataSet(t *testing.T) {
	// key-load-delay: 0.2ms for each command loaded, 0.6s in all.
	s := Start(t, Options{Persist: true, Args: []string{"--key-load-delay", "200"}})
	const n = 3000
	conn, err := net.Dial("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var b strings.Builder
	for i := range n {
		k := strconv.Itoa(i)
		fmt.Fprintf(&b, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$1\r\nv\r\n", len(k), k)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	for range n {
		if reply, err := readReply(r); err != nil || reply != "OK" {
			t.Fatalf("SET: %q %v", reply, err)
		}
	}
	s.Restart()
	if got, err := Command(s.Addr, "GET", strconv.Itoa(n-1)); err != nil || got != "v" {
		t.Fatalf("GET right after Restart: %q %v", got, err)
	}
}
