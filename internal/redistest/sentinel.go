package redistest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"
)

// StartSentinel starts one Redis Sentinel (redis-server --sentinel) that
// monitors master under name with a quorum of 1, so that it alone fails
// the master over once it has not answered for downAfter.
func StartSentinel(t TB, master *Server, name string, downAfter time.Duration) *Server {
	t.Helper()
	bin := Binary(t)
	var lastErr error
	for range 5 {
		port, err := freePort(false)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		dir := filepath.Join(t.TempDir(), "sentinel-"+strconv.Itoa(port))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf(`port %d
bind 127.0.0.1
daemonize no
protected-mode no
dir %s
logfile %s
sentinel monitor %s 127.0.0.1 %d 1
sentinel down-after-milliseconds %s %d
sentinel failover-timeout %s 10000
`, port, dir, filepath.Join(dir, "redis.log"), name, master.Port, name, downAfter.Milliseconds(), name)
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		s := &Server{t: t, Port: port, Addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir,
			args: []string{bin, conf, "--sentinel"}}
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.cleanup)
			return s
		}
	}
	t.Fatalf("redistest: starting a sentinel: %v", lastErr)
	return nil
}
