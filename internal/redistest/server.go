package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
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
	t       TB
	Port    int
	Addr    string // 127.0.0.1:<port>
	dir     string
	args    []string
	mu      sync.Mutex
	cmd     *exec.Cmd
	exited  chan struct{}
	stopped bool
}

// Start starts a single redis-server and waits until it serves (itself:
// the INFO reply names its process).
func Start(t TB, opts Options) *Server {
	t.Helper()
	s, err := startOnFreePort(t, Binary(t), false, opts)
	if err != nil {
		t.Fatalf("redistest: starting redis-server: %v", err)
	}
	return s
}

func newServer(t TB, bin string, port int, opts Options) *Server {
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
		if info, err := Command(s.Addr, "INFO", "server"); err == nil && InfoField(info, "process_id") == strconv.Itoa(cmd.Process.Pid) {
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
