package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// demo is the parent's side: the servers' clients, and every step's
// process, for the report.
type demo struct {
	bank, statements *pgxpool.Pool
	nc               *nats.Conn
	stream           jetstream.Stream
	cons             jetstream.Consumer
	env              []string // what the processes are told
	procs            []*proc
}

// stepTimeout bounds each step's wait: for a process to reach its crash
// point, to finish, or for the consumer to answer every message.
const stepTimeout = 30 * time.Second

// run starts the servers, plays the steps, checks the outcome and prints
// it; ok is false when a transfer was not committed, published and
// applied exactly once.
func run() (ok bool, err error) {
	began := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "idem-ledger-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(dir)
	pg, err := startPostgres()
	if err != nil {
		return false, err
	}
	defer pg.stop()
	ns, err := startNATS(dir)
	if err != nil {
		return false, err
	}
	defer func() { ns.Shutdown(); ns.WaitForShutdown() }()
	d := &demo{env: []string{envBank + "=" + pg.dsn("bank"), envStatements + "=" + pg.dsn("statements"),
		envNATS + "=" + ns.ClientURL()}}
	defer d.close()
	if d.bank, err = createDatabase(ctx, pg.dsn("postgres"), pg.dsn("bank"), "bank", bankSchema); err != nil {
		return false, err
	}
	if d.statements, err = createDatabase(ctx, pg.dsn("postgres"), pg.dsn("statements"), "statements", statementsSchema); err != nil {
		return false, err
	}
	if d.nc, err = nats.Connect(ns.ClientURL()); err != nil {
		return false, err
	}
	js, err := jetstream.New(d.nc)
	if err != nil {
		return false, err
	}
	if d.stream, d.cons, err = createStream(ctx, js); err != nil {
		return false, err
	}
	fmt.Printf("PostgreSQL on %s (databases bank and statements), NATS JetStream on %s (stream %s, duplicate window %v)\n",
		pg.addr(), strings.TrimPrefix(ns.ClientURL(), "nats://"), streamName, dupWindow)
	fmt.Printf("idem lease %v, consumer AckWait %v; each step is a process of its own, killed with SIGKILL once or twice\n\n", lease, ackWait)
	if err := d.transfers(); err != nil {
		return false, err
	}
	if err := d.relay(); err != nil {
		return false, err
	}
	if err := d.consume(ctx); err != nil {
		return false, err
	}
	ok, err = d.check(ctx)
	if err != nil {
		return false, err
	}
	fmt.Printf("(%.1fs)\n", time.Since(began).Seconds())
	return ok, nil
}

func (d *demo) close() {
	for _, p := range d.procs {
		p.end()
	}
	if d.nc != nil {
		d.nc.Close()
	}
	if d.bank != nil {
		d.bank.Close()
	}
	if d.statements != nil {
		d.statements.Close()
	}
}

// start starts a step's process.
func (d *demo) start(role, crash string) (*proc, error) {
	name := fmt.Sprintf("%s #%d", role, 1+d.count(role))
	p, err := startProc(role, name, crash, d.env...)
	if err != nil {
		return nil, err
	}
	d.procs = append(d.procs, p)
	return p, nil
}

func (d *demo) count(role string) int {
	n := 0
	for _, p := range d.procs {
		if strings.HasPrefix(p.name, role+" ") {
			n++
		}
	}
	return n
}

// crash runs a process of role until it reaches crash, and kills it there.
func (d *demo) crash(role, crash string) (*proc, error) {
	p, err := d.start(role, crash)
	if err != nil {
		return nil, err
	}
	if _, err := p.waitFor("at "+crash, stepTimeout); err != nil {
		return nil, err
	}
	return p, p.kill()
}

// finish runs a process of role to its end.
func (d *demo) finish(role string) (*proc, error) {
	p, err := d.start(role, "")
	if err != nil {
		return nil, err
	}
	return p, p.wait(stepTimeout)
}

// transfers: a process killed before a transfer's COMMIT, one killed after
// another's, and one that makes them all.
func (d *demo) transfers() error {
	fmt.Println("1. transfers: each writes a debit, a credit and an outbox row in one transaction, " +
		"committed with its idem record (pgtx.Do, key transfer:<id>); every process retries every transfer")
	for _, crash := range []string{"before-commit t-03", "after-commit t-05", ""} {
		p, err := d.run("transfers", crash)
		if err != nil {
			return err
		}
		fmt.Printf("   %s: %s\n", p.name, describe(p))
	}
	fmt.Println()
	return nil
}

// relay: a relay killed between a publish and its mark, then one that
// publishes the rest.
func (d *demo) relay() error {
	fmt.Println("2. relay: publishes each unsent outbox row with Nats-Msg-Id = the row's id, then marks it sent")
	for _, crash := range []string{"mid-relay t-04", ""} {
		p, err := d.run("relay", crash)
		if err != nil {
			return err
		}
		fmt.Printf("   %s: %s\n", p.name, describe(p))
	}
	fmt.Println()
	return nil
}

// run runs a process of role to crash, or to its end when crash is "".
func (d *demo) run(role, crash string) (*proc, error) {
	if crash == "" {
		return d.finish(role)
	}
	return d.crash(role, crash)
}
