package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemrt/idem/store/redisstore"
)

// redisBenchResult is redis-benchmark's rate for the claim script, run on
// new keys with pipelining: the server's ceiling for the claim part of a
// request.
type redisBenchResult struct {
	claimsPerSec float64
	command      string
	err          error
}

// runRedisBenchmark runs redis-benchmark on redisstore's claim script (by
// its SHA, loaded first), 50 connections pipelining 16 commands each, on
// new random keys. The arguments follow the script's layout (KEYS: the
// record and its waiter set, one hash tag; ARGV: owner, lease ms, TTL ms,
// fingerprint, waiter member; the script reads the fence of a new record
// from the server's clock). A record lives lease + TTL: 30 s + 30 s, so
// that keys left behind (redisBenchmark deletes them) expire soon rather
// than add their expiry to the server's CPU in later runs. Every claim of
// the store, of a new key too, is this script.
func runRedisBenchmark(ctx context.Context, cfg Config, loadScript func(context.Context, string) (string, error)) *redisBenchResult {
	rb := &redisBenchResult{}
	bin, err := exec.LookPath("redis-benchmark")
	if err != nil {
		rb.err = errors.New("redis-benchmark is not on PATH (Debian: redis-tools)")
		return rb
	}
	if cfg.Store != "redis" {
		rb.err = errors.New("runs against a single node only")
		return rb
	}
	sha, err := loadScript(ctx, redisstore.ScriptSource("claim"))
	if err != nil {
		rb.err = err
		return rb
	}
	host, port, _ := strings.Cut(cfg.RedisAddrs[0], ":")
	args := []string{"-h", host, "-p", port, "-c", "50", "-P", "16", "-n", "200000", "-r", "100000000", "-q",
		"EVALSHA", sha, "2", "rb:{__rand_int__}", "rb:{__rand_int__}:w", "owner", "30000", "30000", "", ""}
	rb.command = bin + " " + strings.Join(args, " ")
	cctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(cctx, bin, args...).CombinedOutput()
	if err != nil {
		rb.err = fmt.Errorf("%v: %s", err, bytes.TrimSpace(out))
		return rb
	}
	re := regexp.MustCompile(`([0-9.]+) requests per second`)
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		for _, part := range strings.Split(sc.Text(), "\r") {
			if m := re.FindStringSubmatch(part); m != nil {
				rb.claimsPerSec, _ = strconv.ParseFloat(m[1], 64)
			}
		}
	}
	if rb.claimsPerSec == 0 {
		rb.err = fmt.Errorf("no rate in redis-benchmark's output: %q", out)
	}
	return rb
}

// redisBenchKeys matches the keys runRedisBenchmark writes.
const redisBenchKeys = "rb:*"

// unlinkMatching deletes the keys of a single node that match pattern,
// SCAN by SCAN.
func unlinkMatching(ctx context.Context, client redis.UniversalClient, pattern string) error {
	var cursor uint64
	for {
		keys, next, err := client.Scan(ctx, cursor, pattern, 1000).Result()
		if err != nil {
			return err
		}
		if len(keys) > 0 {
			if err := client.Unlink(ctx, keys...).Err(); err != nil {
				return err
			}
		}
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// loadInto returns a function that loads a script on client and returns
// its SHA, checked against the one computed here.
func loadInto(client redis.UniversalClient) func(context.Context, string) (string, error) {
	return func(ctx context.Context, src string) (string, error) {
		sum := sha1.Sum([]byte(src))
		want := hex.EncodeToString(sum[:])
		got, err := client.ScriptLoad(ctx, src).Result()
		if err == nil && got != want {
			err = fmt.Errorf("script SHA %s, want %s", got, want)
		}
		return got, err
	}
}
