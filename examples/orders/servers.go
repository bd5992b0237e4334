package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/redis/go-redis/v9"
)

// The two servers the consumer processes share: a NATS server with
// JetStream inside this process, and a redis-server process of the
// example's own. Both listen on a free loopback port and keep their files
// in the example's temporary directory; neither is a server that was
// already running on the machine.

// startNATS starts a NATS server with JetStream in this process.
func startNATS(dir string) (*server.Server, error) {
	srv, err := server.NewServer(&server.Options{
		Host:      "127.0.0.1",
		Port:      server.RANDOM_PORT,
		JetStream: true,
		StoreDir:  filepath.Join(dir, "nats"),
		NoLog:     true,
		NoSigs:    true,
	})
	if err != nil {
		return nil, fmt.Errorf("nats server: %w", err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		return nil, errors.New("nats server: not ready after 10s")
	}
	return srv, nil
}

// redisServer is a redis-server process started by the example.
type redisServer struct {
	addr   string
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

// errNoRedis says what to do when redis-server is missing.
var errNoRedis = errors.New("redis-server is not on PATH; this example starts one of its own " +
	"(the consumer processes share their idem store in it). Install it (Debian/Ubuntu: " +
	"sudo apt-get install redis-server; macOS: brew install redis) and run again")

// startRedis starts redis-server on a free loopback port, without
// persistence, and waits until it serves. It tries three ports: a port
// found free can be taken before the server binds it.
func startRedis(dir string) (*redisServer, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, errNoRedis
	}
	for try := 1; ; try++ {
		s, err := launchRedis(bin, dir)
		if err == nil || try == 3 {
			return s, err
		}
	}
}

func launchRedis(bin, dir string) (*redisServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	s := &redisServer{addr: "127.0.0.1:" + port, exited: make(chan struct{}),
		log: filepath.Join(dir, "redis-"+port+".log")}
	s.cmd = exec.Command(bin, "--port", port, "--bind", "127.0.0.1", "--dir", dir,
		"--logfile", s.log, "--save", "", "--appendonly", "no", "--protected-mode", "no")
	dieWithParent(s.cmd)
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("redis-server: %w", err)
	}
	go func() { _ = s.cmd.Wait(); close(s.exited) }()
	if err := s.waitReady(); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitReady waits until the server answers, and is this process (not
// another server that took the port first).
func (s *redisServer) waitReady() error {
	rc := redis.NewClient(&redis.Options{Addr: s.addr, MaxRetries: -1})
	defer rc.Close()
	pid := "process_id:" + strconv.Itoa(s.cmd.Process.Pid)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case <-s.exited:
			return fmt.Errorf("redis-server exited at start; its log:\n%s", s.readLog())
		default:
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := rc.Info(ctx, "server").Result()
		cancel()
		if err == nil && strings.Contains(info, pid+"\r\n") {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on %s not ready after 10s; its log:\n%s", s.addr, s.readLog())
}

func (s *redisServer) readLog() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

// stop kills the server and waits until it is gone.
func (s *redisServer) stop() {
	_ = s.cmd.Process.Kill()
	<-s.exited
}
