package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// proc is a step's process, as the parent sees it: its events (the lines
// of its standard output), and its end.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser // closing it stops a consumer
	exited chan struct{}
	err    error // its exit status, once exited is closed

	mu      sync.Mutex
	events  []string
	changed chan struct{} // a token when events grow or the process exits
}

// startProc runs this program's binary again as role, named name, to be
// killed at crash ("" for never), with env added.
func startProc(role, name, crash string, env ...string) (*proc, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envRole+"="+role, envName+"="+name, envCrash+"="+crash)
	cmd.Env = append(cmd.Env, env...)
	cmd.Stderr = os.Stderr
	dieWithParent(cmd)
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{}), changed: make(chan struct{}, 1)}
	if p.stdin, err = cmd.StdinPipe(); err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			p.mu.Lock()
			p.events = append(p.events, sc.Text())
			p.mu.Unlock()
			p.poke()
		}
		p.err = cmd.Wait()
		close(p.exited)
		p.poke()
	}()
	return p, nil
}

func (p *proc) poke() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// lines returns the events so far.
func (p *proc) lines() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.events...)
}

// waitFor waits up to timeout until the process says a line starting with
// prefix, and returns it.
func (p *proc) waitFor(prefix string, timeout time.Duration) (string, error) {
	deadline := time.After(timeout)
	for {
		for _, l := range p.lines() {
			if strings.HasPrefix(l, prefix) {
				return l, nil
			}
		}
		select {
		case <-p.exited:
			return "", fmt.Errorf("%s exited (%v) before saying %q", p.name, p.err, prefix)
		default:
		}
		select {
		case <-p.changed:
		case <-deadline:
			return "", fmt.Errorf("%s did not say %q within %v", p.name, prefix, timeout)
		}
	}
}

// kill sends SIGKILL and waits until the process is gone.
func (p *proc) kill() error {
	if err := p.cmd.Process.Kill(); err != nil {
		return err
	}
	<-p.exited
	return nil
}

// wait waits up to timeout for the process to end by itself, and returns
// its failure.
func (p *proc) wait(timeout time.Duration) error {
	select {
	case <-p.exited:
	case <-time.After(timeout):
		_ = p.kill()
		return fmt.Errorf("%s did not finish within %v", p.name, timeout)
	}
	if p.err != nil {
		return fmt.Errorf("%s: %w", p.name, p.err)
	}
	return nil
}

// stop closes the process's standard input (a consumer stops then) and
// waits for it to end.
func (p *proc) stop(timeout time.Duration) error {
	_ = p.stdin.Close()
	return p.wait(timeout)
}

// end kills the process if it still runs: for the paths that give up.
func (p *proc) end() {
	select {
	case <-p.exited:
	default:
		_ = p.kill()
	}
}
