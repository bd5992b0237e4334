package pgtest

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Kill stops the postmaster and every backend with SIGKILL, as a crash
// would, and waits until the postmaster is gone.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.stopped = true
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return // stopped already: its pid may belong to another process now
	default:
	}
	signalAll(cmd.Process.Pid, syscall.SIGKILL)
	<-exited
}

// StopImmediate stops the server as `pg_ctl stop -m immediate` does: it
// sends the postmaster SIGQUIT, which ends every backend at once, without
// a checkpoint, and waits until the postmaster is gone. Clients see their
// connections dropped; the next start recovers from the write-ahead log,
// as after a crash. Start it again with Restart.
func (s *Server) StopImmediate() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.stopped = true
	s.mu.Unlock()
	if cmd == nil {
		return
	}
	select {
	case <-exited:
		return
	default:
	}
	signalAll(cmd.Process.Pid, syscall.SIGCONT) // a paused server cannot act on SIGQUIT
	_ = cmd.Process.Signal(syscall.SIGQUIT)
	select {
	case <-exited:
	case <-time.After(10 * time.Second):
		s.Kill()
	}
}

// Pause stops the postmaster and every backend with SIGSTOP: connections
// stay open, and nothing is answered until Resume.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume continues a paused server with SIGCONT.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil && !s.stopped {
		signalAll(s.cmd.Process.Pid, sig)
	}
}

// Restart kills the server (if it runs; after Kill or StopImmediate it
// does not) and starts it again on the same port with the same data
// directory: it recovers from its write-ahead log like a server after a
// crash.
func (s *Server) Restart() error {
	s.Kill()
	var err error
	for range 100 { // backends may linger for a moment, and the port too
		if err = s.start(); err == nil {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("pgtest: restart on port %d: %w", s.Port, err)
}

// Close stops the server (immediately, as pg_ctl stop -m immediate would,
// then SIGKILL) and removes its directory. It is idempotent.
func (s *Server) Close() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	if cmd != nil {
		signalAll(cmd.Process.Pid, syscall.SIGCONT)
		_ = cmd.Process.Signal(syscall.SIGQUIT) // immediate shutdown
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
		}
		s.Kill()
	}
	_ = os.RemoveAll(s.dir)
}

// signalAll sends sig to the postmaster pid, then to each of its children
// (the postmaster, stopped or killed first, starts no new one).
func signalAll(pid int, sig syscall.Signal) {
	_ = syscall.Kill(pid, sig)
	for _, child := range children(pid) {
		_ = syscall.Kill(child, sig)
	}
}

// children returns the processes whose parent is pid, from /proc.
func children(pid int) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range entries {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses,
		// so read after its last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(string(b[i+1:]))
		if len(f) >= 2 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}
