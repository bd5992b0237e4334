package natstest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Process is a nats-server process, started from the binary on PATH (the
// version the machine's package provides: 2.9.10 on Debian 12), with
// JetStream on a free loopback port and a store directory of the test's
// own. It can be killed (SIGKILL) and started again on the same port and
// store. The test's cleanup kills it.
type Process struct {
	t       testing.TB
	bin     string
	dir     string // the store directory
	logPath string
	port    int

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd has exited

	// URL is the server's client URL, the same across restarts.
	URL string
	// Version is the server's version, as it announced it to a client.
	Version string
}

// Binary is the name of the server binary StartProcess runs.
const Binary = "nats-server"

// StartProcess starts nats-server from PATH (or /usr/sbin) with JetStream
// on a free loopback port. A missing binary fails the test (it never skips), saying
// how to install it.
func StartProcess(t testing.TB) *Process {
	t.Helper()
	bin, err := exec.LookPath(Binary)
	if err != nil {
		// Debian's package puts it in /usr/sbin, which a user's PATH
		// may lack.
		bin, err = exec.LookPath(filepath.Join("/usr/sbin", Binary))
	}
	if err != nil {
		t.Fatal("natstest: nats-server is not on PATH. Install it (Debian/Ubuntu: " +
			"sudo apt-get install -y nats-server) or run `make test`, which installs it when it can.")
	}
	dir := t.TempDir()
	p := &Process{t: t, bin: bin, dir: filepath.Join(dir, "store"), logPath: filepath.Join(dir, "nats-server.log")}
	t.Cleanup(p.Kill)
	// A free port can be taken by another process before the server
	// listens on it: a few ports are tried.
	for try := 1; ; try++ {
		if p.port, err = freePort(); err == nil {
			p.URL = "nats://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
			if err = p.start(Timeout); err == nil {
				return p
			}
		}
		if try == 3 {
			t.Fatalf("natstest: %v", err)
		}
		t.Logf("natstest: %v; trying another port", err)
	}
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("natstest: no free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// start runs the binary and waits up to ready for it to serve JetStream
// requests. On failure the process is killed and the error holds the end
// of its log.
func (p *Process) start(ready time.Duration) error {
	logf, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("natstest: log file: %w", err)
	}
	cmd := exec.Command(p.bin, "-a", "127.0.0.1", "-p", strconv.Itoa(p.port), "-js", "-sd", p.dir)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		return fmt.Errorf("natstest: start %s: %w", p.bin, err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(done)
	}()
	p.mu.Lock()
	p.cmd, p.done = cmd, done
	p.mu.Unlock()
	version, err := waitReady(p.URL, done, ready)
	if err != nil {
		p.Kill()
		return fmt.Errorf("%w; the end of its log:\n%s", err, p.logTail())
	}
	p.Version = version
	return nil
}

// waitReady waits until a client of url gets JetStream's account info,
// and returns the server's version; it gives up when exited is closed (the
// process ended) or after ready.
func waitReady(url string, exited <-chan struct{}, ready time.Duration) (string, error) {
	deadline := time.Now().Add(ready)
	var last error
	for {
		select {
		case <-exited:
			return "", errors.New("natstest: nats-server exited while starting")
		default:
		}
		version, err := jetStreamUp(url)
		if err == nil {
			return version, nil
		}
		last = err
		if time.Now().After(deadline) {
			return "", fmt.Errorf("natstest: nats-server not ready within %v: %w", ready, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// jetStreamUp connects to url once and asks for JetStream's account info.
func jetStreamUp(url string) (string, error) {
	nc, err := nats.Connect(url, nats.Timeout(time.Second), nats.NoReconnect())
	if err != nil {
		return "", err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := js.AccountInfo(ctx); err != nil {
		return "", err
	}
	return nc.ConnectedServerVersion(), nil
}

// logTail returns the last 2 KiB of the server's log.
func (p *Process) logTail() string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	if len(b) > 2048 {
		b = b[len(b)-2048:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(b)
}

// Kill kills the server with SIGKILL and waits until it has exited:
// nothing is flushed or closed cleanly, as in a crash. Calling it on a
// stopped server does nothing.
func (p *Process) Kill() {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Kill()
	<-done
}

// Restart kills the server (SIGKILL), if it runs, and starts it again on
// the same port with the same store directory: what the server had
// written survives, as after a crash. While the port is not free yet it
// tries again, each attempt short, until Timeout has passed.
func (p *Process) Restart() {
	p.t.Helper()
	p.Kill()
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port))
	deadline := time.Now().Add(Timeout)
	for {
		err := portFree(addr)
		if err == nil {
			err = p.start(5 * time.Second) // JetStream recovers its store first
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			p.t.Fatalf("natstest: restart: %v", err)
		}
		p.t.Logf("natstest: restart: %v; trying again", err)
		time.Sleep(50 * time.Millisecond)
	}
}

// ClientURL returns the server's client URL.
func (p *Process) ClientURL() string { return p.URL }

// ServerVersion returns the server's version.
func (p *Process) ServerVersion() string { return p.Version }

// Connect returns a client connection to the server that reconnects
// without limit (across restarts), closed at the end of the test.
func (p *Process) Connect(t testing.TB, opts ...nats.Option) *nats.Conn {
	t.Helper()
	return connect(t, p.URL, opts)
}
