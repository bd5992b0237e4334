package redistest

import "testing"

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
