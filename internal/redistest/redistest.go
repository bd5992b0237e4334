// Package redistest starts real redis-server processes for tests: a single
// node, or a cluster of masters made with redis-cli --cluster create. Every
// server listens on a free loopback port, keeps its files in the test's
// temporary directory, and is killed when the test ends (and, through the
// parent-death signal, if the test binary dies). Servers can be killed
// (SIGKILL), paused (SIGSTOP), resumed (SIGCONT) and restarted on the same
// port, for fault tests.
//
// A missing redis-server is a test failure, never a skip: install Debian's
// redis-server package (the project's test command does it when it can).
package redistest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Options adjust a server.
type Options struct {
	// Persist turns on the append-only file with an fsync per write, so a
	// restarted server keeps every write it acknowledged.
	Persist bool
	// Args are added to the command line.
	Args []string
}

// Server is one redis-server process.
type Server struct {
	t       testing.TB
	Port    int
	Addr    string // 127.0.0.1:<port>
	dir     string
	args    []string
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool
}

// Binary returns the path of redis-server, or fails the test with a message
// that says how to install it.
func Binary(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatal("redistest: redis-server is not on PATH. Install it (Debian/Ubuntu: " +
			"sudo apt-get install -y redis-server) or run `make test`, which installs it when it can.")
	}
	return p
}

// Start starts a single redis-server and waits until it serves (itself:
// the INFO reply names its process).
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	bin := Binary(t)
	var lastErr error
	for range 5 { // a free port can be taken between the check and the start
		port, err := freePort(false)
		if err != nil {
			t.Fatalf("redistest: %v", err)
		}
		s := newServer(t, bin, port, opts)
		if lastErr = s.start(); lastErr == nil {
			t.Cleanup(s.cleanup)
			return s
		}
	}
	t.Fatalf("redistest: starting redis-server: %v", lastErr)
	return nil
}

func newServer(t testing.TB, bin string, port int, opts Options) *Server {
	dir := filepath.Join(t.TempDir(), "redis-"+strconv.Itoa(port))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	args := []string{bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--dir", dir,
		"--logfile", filepath.Join(dir, "redis.log"),
		"--save", "",
		"--daemonize", "no",
		"--protected-mode", "no",
	}
	if opts.Persist {
		args = append(args, "--appendonly", "yes", "--appendfsync", "always")
	} else {
		args = append(args, "--appendonly", "no")
	}
	args = append(args, opts.Args...)
	return &Server{t: t, Port: port, Addr: "127.0.0.1:" + strconv.Itoa(port), dir: dir, args: args}
}

// start launches the process and waits until it is ready.
func (s *Server) start() error {
	cmd := exec.Command(s.args[0], s.args[1:]...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	s.mu.Lock()
	s.cmd, s.exited, s.stopped = cmd, exited, false
	s.mu.Unlock()
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-exited:
			return fmt.Errorf("redis-server on port %d exited at start; log:\n%s", s.Port, s.Log())
		default:
		}
		// Ready means this process serves. Another server may hold the
		// port (taken between freePort and now, or since a Kill): it would
		// answer a PING as well, and the test would use a server that is
		// not its own; ours then exits at start, which ends the wait. And
		// ours answers INFO while it still loads its data set, when PING
		// (like every command that touches data) fails with LOADING.
		if info, err := Command(s.Addr, "INFO", "server"); err == nil && infoField(info, "process_id") == strconv.Itoa(cmd.Process.Pid) {
			if reply, err := Command(s.Addr, "PING"); err == nil && reply == "PONG" {
				return nil
			}
		}
		if time.Now().After(deadline) {
			s.Kill()
			return fmt.Errorf("redis-server on port %d not ready after 15s; log:\n%s", s.Port, s.Log())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// infoField returns the value of field in the text of an INFO reply.
func infoField(info, field string) string {
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimRight(line, "\r"), field+":"); ok {
			return v
		}
	}
	return ""
}

// Log returns the server's log file.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	return string(b)
}

// Kill stops the server with SIGKILL and waits until it is gone.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.stopped = true
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGKILL)
	<-exited
}

// Pause stops the process with SIGSTOP: it keeps its connections but
// answers nothing until Resume.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused process with SIGCONT.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && !s.stopped {
		if err := s.cmd.Process.Signal(sig); err != nil {
			s.t.Errorf("redistest: signal %v: %v", sig, err)
		}
	}
}

// Restart kills the server (if it runs) and starts it again on the same
// port with the same files. Without Options.Persist it comes back empty.
func (s *Server) Restart() {
	s.t.Helper()
	s.Kill()
	var err error
	for range 50 { // the port may linger for a moment
		if err = s.start(); err == nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.t.Fatalf("redistest: restart on port %d: %v", s.Port, err)
}

func (s *Server) cleanup() {
	s.mu.Lock()
	cmd := s.cmd
	s.mu.Unlock()
	if cmd != nil {
		_ = cmd.Process.Signal(syscall.SIGCONT)
	}
	s.Kill()
}

// Cluster is a Redis Cluster of masters without replicas.
type Cluster struct {
	Nodes []*Server
}

// Addrs returns the addresses of the cluster's nodes.
func (c *Cluster) Addrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr
	}
	return out
}

// StartCluster starts masters nodes (3 at least) with cluster mode on, joins
// them with redis-cli --cluster create, and waits until every node reports
// cluster_state:ok. Their cluster bus ports (port+10000) are free too.
func StartCluster(t testing.TB, masters int) *Cluster {
	t.Helper()
	if masters < 3 {
		t.Fatal("redistest: a cluster needs at least 3 masters")
	}
	bin := Binary(t)
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatal("redistest: redis-cli is not on PATH (Debian/Ubuntu: sudo apt-get install -y redis-tools)")
	}
	c := &Cluster{}
	for range masters {
		var node *Server
		var lastErr error
		for range 5 {
			port, err := freePort(true)
			if err != nil {
				t.Fatalf("redistest: %v", err)
			}
			node = newServer(t, bin, port, Options{Args: []string{
				"--cluster-enabled", "yes",
				"--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", "2000",
			}})
			if lastErr = node.start(); lastErr == nil {
				break
			}
			node = nil
		}
		if node == nil {
			t.Fatalf("redistest: starting a cluster node: %v", lastErr)
		}
		t.Cleanup(node.cleanup)
		c.Nodes = append(c.Nodes, node)
	}
	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli --cluster create: %v\n%s", err, out)
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range c.Nodes {
		for {
			info, err := Command(n.Addr, "CLUSTER", "INFO")
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("redistest: node %s not cluster_state:ok after 30s: %v %q", n.Addr, err, info)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return c
}

// freePort returns a loopback port that is free now; with bus set, port
// +10000 is free too (a cluster node's bus port).
func freePort(bus bool) (int, error) {
	for range 100 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !bus {
			l.Close()
			return port, nil
		}
		if port+10000 > 65535 {
			l.Close()
			continue
		}
		l2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port+10000))
		l.Close()
		if err != nil {
			continue
		}
		l2.Close()
		return port, nil
	}
	return 0, errors.New("no free loopback port found")
}

// Command sends one command to addr over RESP and returns the reply as
// text (bulk and simple strings, integers; arrays joined by newlines). It
// needs no client library, so the helpers work before any client is set up.
func Command(addr string, args ...string) (string, error) {
	return CommandTimeout(addr, 5*time.Second, args...)
}

// CommandTimeout is Command with its own deadline.
func CommandTimeout(addr string, d time.Duration, args ...string) (string, error) {
	conn, err := net.DialTimeout("tcp", addr, d)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(d))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return "", err
	}
	return readReply(bufio.NewReader(conn))
}

func readReply(r *bufio.Reader) (string, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", errors.New(line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", err
		}
		parts := make([]string, 0, n)
		for range n {
			p, err := readReply(r)
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return strings.Join(parts, "\n"), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}
