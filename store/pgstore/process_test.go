package pgstore_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemrt/idem"
	"github.com/idemrt/idem/internal/storesuite"
	"github.com/idemrt/idem/store/pgstore"
)

// The multi-process tests (storesuite.ExactlyOnce, KilledMidRun) re-execute
// this test binary as worker processes; TestMain sends them to
// storesuite.WorkerMain on a store of their own pool. Each execution
// records itself in a table of executions next to the store's table.

const (
	envDSN   = "IDEM_TEST_DSN"
	envTable = "IDEM_TEST_TABLE"
)

// execTable is the table of executions of the store's table.
func execTable(table string) string { return pgx.Identifier{table + "_exec"}.Sanitize() }

func openWorker(ctx context.Context) (storesuite.Worker, error) {
	table := os.Getenv(envTable)
	pool, err := pgxpool.New(ctx, os.Getenv(envDSN))
	if err != nil {
		return storesuite.Worker{}, err
	}
	s, err := pgstore.New(ctx, pool, pgstore.Options{Table: table})
	if err != nil {
		pool.Close()
		return storesuite.Worker{}, err
	}
	return storesuite.Worker{
		Store: s,
		Record: func(ctx context.Context, key, worker string) error {
			_, err := pool.Exec(ctx, "INSERT INTO "+execTable(table)+" (key, worker) VALUES ($1, $2)", key, worker)
			return err
		},
		Close: func() { s.Close(); pool.Close() },
	}, nil
}

// processes migrates a new table and its table of executions on the
// shared server, for workers to share.
func processes(t *testing.T) storesuite.Processes {
	p, _ := processesOn(t)
	return p
}

// processesOn is processes, with the table, for a store of the test
// process's own among the workers.
func processesOn(t *testing.T) (storesuite.Processes, string) {
	table := newTable()
	pool := sharedPool(t)
	newStore(t, pool, pgstore.Options{Table: table})
	if _, err := pool.Exec(bg, "CREATE TABLE "+execTable(table)+" (n bigserial, key text, worker text)"); err != nil {
		t.Fatal(err)
	}
	return storesuite.Processes{
		Env: []string{envDSN + "=" + shared.DSN("postgres"), envTable + "=" + table},
		Executions: func(t testing.TB, keys int) [][]string {
			rows, err := pool.Query(bg, "SELECT key, worker FROM "+execTable(table)+" ORDER BY n")
			if err != nil {
				t.Fatal(err)
			}
			out := make([][]string, keys)
			var key, w string
			_, err = pgx.ForEachRow(rows, []any{&key, &w}, func() error {
				i, err := strconv.Atoi(strings.TrimPrefix(key, "k"))
				if err != nil || i < 0 || i >= keys {
					return fmt.Errorf("execution of unknown key %q", key)
				}
				out[i] = append(out[i], w)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			return out
		},
	}, table
}

func TestProcessesExactlyOnce(t *testing.T) {
	t.Parallel()
	storesuite.ExactlyOnce(t, processes(t))
}

func TestProcessKilledMidRun(t *testing.T) {
	t.Parallel()
	storesuite.KilledMidRun(t, processes(t))
}

// A worker holding keys through Do and httpidem is SIGKILLed: with default
// settings (a lease of 60s), its keys run again within 10s.
func TestKilledOwnerTakenOverEarly(t *testing.T) {
	t.Parallel()
	p, table := processesOn(t)
	rt := newRuntime(t, idem.Options{Store: newStore(t, sharedPool(t), pgstore.Options{Table: table})})
	storesuite.KilledOwnerTakenOver(t, p, rt)
}
