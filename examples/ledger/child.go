package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/store/pgstore"
)

// A step's process is this program's binary run again with envRole set
// (by go run's binary and by the test binary alike). It reports what it
// does on its standard output, one event a line, for the parent to read;
// where it is to be killed it says "at <point> <transfer>" and waits.

const (
	envRole       = "IDEM_LEDGER_ROLE"       // transfers, relay or consumer
	envName       = "IDEM_LEDGER_NAME"       // the process's name in the report
	envCrash      = "IDEM_LEDGER_CRASH"      // "<point> <transfer>": where to wait to be killed
	envBank       = "IDEM_LEDGER_BANK"       // the bank database
	envStatements = "IDEM_LEDGER_STATEMENTS" // the statements database
	envNATS       = "IDEM_LEDGER_NATS"       // the NATS server
)

// childMain runs role and returns the process's exit code.
func childMain(role string) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var err error
	switch role {
	case "transfers":
		err = runTransfers(ctx)
	case "relay":
		err = runRelay(ctx)
	case "consumer":
		// Runs until its standard input closes: the parent closes it to
		// stop the consumer (and it closes by itself when the parent dies).
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			cancel()
		}()
		err = runConsumer(ctx)
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", os.Getenv(envName), err)
		return 1
	}
	return 0
}

// say reports an event to the parent.
func say(format string, args ...any) { fmt.Printf(format+"\n", args...) }

// crashAt reports whether this process is to be killed at point in
// transfer t; if so, it says so and waits for the SIGKILL. (Should the
// parent die instead, its standard input closes and the process exits.)
func crashAt(point, t string) {
	if os.Getenv(envCrash) != point+" "+t {
		return
	}
	say("at %s %s", point, t)
	_, _ = io.Copy(io.Discard, os.Stdin)
	os.Exit(3)
}

// service is what a process needs of its database: the idem runtime on a
// pgstore store, and a pool for its own work (not the store's: a
// transaction holds its connection while the work runs, and would starve
// the store's lease renewals).
type service struct {
	rt    *idem.Runtime
	st    *pgstore.Store
	pool  *pgxpool.Pool // the store's
	work  *pgxpool.Pool
	close func()
}

func openService(ctx context.Context, dsn string) (*service, error) {
	s := &service{}
	var closers []func()
	s.close = func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	var err error
	if s.pool, err = pgxpool.New(ctx, dsn); err != nil {
		return nil, err
	}
	closers = append(closers, s.pool.Close)
	if s.work, err = pgxpool.New(ctx, dsn); err != nil {
		s.close()
		return nil, err
	}
	closers = append(closers, s.work.Close)
	if s.st, err = pgstore.New(ctx, s.pool, pgstore.Options{}); err != nil {
		s.close()
		return nil, err
	}
	closers = append(closers, func() { s.st.Close() })
	s.rt, err = idem.New(idem.Options{Store: s.st, Policy: idem.Policy{Lease: lease, Settle: settle}})
	if err != nil {
		s.close()
		return nil, err
	}
	closers = append(closers, func() { _ = s.rt.Close(context.Background()) })
	return s, nil
}

// claimText describes the claim of the run in ctx: its attempt, and
// whether it took the key over from a run that died.
func claimText(ctx context.Context) string {
	c, ok := idem.ClaimFrom(ctx)
	if !ok {
		return "attempt=? takeover=false"
	}
	return fmt.Sprintf("attempt=%d takeover=%v", c.Attempt, c.Takeover)
}

// field returns the value of name=value among an event's words.
func field(words []string, name string) string {
	for _, w := range words {
		if v, ok := strings.CutPrefix(w, name+"="); ok {
			return v
		}
	}
	return ""
}
