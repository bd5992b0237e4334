package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The tx scenarios run idem, pgtx and the by-hand baseline alternating in
// rounds on a PostgreSQL of the tests' own, and every key ends with one
// row. What is checked is behaviour (the rows, the ratios, the report),
// not speed.
func TestShortRunTxPath(t *testing.T) {
	t.Parallel() // the store-backed runs mostly wait on their servers
	dsn := postgresDSN(t)
	dir := t.TempDir()
	args := []string{"-postgres", dsn, "-scenarios", "tx-unique,tx-dup", "-tx-rounds", "2",
		"-duration", "100ms", "-concurrency", "8", "-no-progress", "-no-sizes", "-out", dir}
	if code := realMain(args); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	rep := readReport(t, dir)
	if !rep.OK || len(rep.Results) != 6 || len(rep.Sizes) != 0 {
		t.Fatalf("OK %v, %d results (want 6), sizes %+v (not asked for)", rep.OK, len(rep.Results), rep.Sizes)
	}
	for _, r := range rep.Results {
		if r.Store != "postgres" || r.Calls == 0 || r.Errors > 0 || r.WrongResults > 0 || r.RanTwiceCount > 0 ||
			r.Executions != r.KeysCompleted || r.Executions == 0 {
			t.Errorf("%s/%s on %s: %d calls, %d errors (%s), %d wrong, %d ran twice, %d executions for %d keys",
				r.Scenario, r.System, r.Store, r.Calls, r.Errors, r.FirstError, r.WrongResults, r.RanTwiceCount, r.Executions, r.KeysCompleted)
		}
		if c := r.Rows; c == nil || !c.OK || c.Rows != r.KeysCompleted || c.Keys != c.Rows {
			t.Errorf("%s/%s: rows %+v for %d keys completed", r.Scenario, r.System, c, r.KeysCompleted)
		}
		if len(r.RoundThroughputs) != 2 {
			t.Errorf("%s/%s: round throughputs %v, want 2 rounds", r.Scenario, r.System, r.RoundThroughputs)
		}
		if r.System != "pgtx" && (len(r.Ratios) > 0 || len(r.RoundRatios) > 0) {
			t.Errorf("%s/%s carries ratios %v %v", r.Scenario, r.System, r.Ratios, r.RoundRatios)
		}
	}
	for _, sc := range []string{"tx-unique", "tx-dup"} {
		p := find(rep.Results, "postgres", sc, "pgtx")
		if p == nil {
			t.Fatalf("%s: no pgtx result", sc)
		}
		for _, o := range []string{"idem", "by-hand"} {
			if !(p.Ratios[o] > 0) || len(p.RoundRatios[o]) != 2 {
				t.Errorf("%s/pgtx: ratio to %s %v, per round %v", sc, o, p.Ratios[o], p.RoundRatios[o])
			}
		}
	}
	if z := find(rep.Results, "postgres", "tx-dup", "by-hand"); z == nil || z.Outcomes["deduped"] == 0 {
		t.Errorf("tx-dup/by-hand: no call found its key done: %+v", z)
	}
	for _, sys := range []string{"idem", "pgtx"} {
		if z := find(rep.Results, "postgres", "tx-dup", sys); z == nil || z.Outcomes["replayed"]+z.Outcomes["joined"] == 0 {
			t.Errorf("tx-dup/%s: no call got a stored result: %+v", sys, z)
		}
	}

	var text bytes.Buffer
	printScenario(&text, "tx-unique", rep.Results)
	printRoundRatios(&text, "tx-unique", rep.Results)
	for _, want := range []string{"rows/keys", "by-hand", "pgtx per round:", "× idem"} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("the text table lacks %q:\n%s", want, text.String())
		}
	}
	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"rows/keys", "per round vs by-hand"} {
		if !bytes.Contains(page, []byte(want)) {
			t.Errorf("report.html lacks %q", want)
		}
	}

	conn, err := pgx.Connect(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(context.Background())
	var left int
	if err := conn.QueryRow(context.Background(), "SELECT count(*) FROM pg_tables WHERE tablename LIKE 'idem_bench%'").Scan(&left); err != nil || left != 0 {
		t.Errorf("%d tables of the runs left behind (%v)", left, err)
	}
}

// The row check fails a key with two rows, a completed key with none and
// a row of a key that never ran.
func TestCountRows(t *testing.T) {
	r := &run{cfg: Config{}, scenario: "tx-unique", prefix: "p:k", tr: newTracker(), maxID: 4}
	for id := int64(1); id <= 3; id++ {
		r.tr.slot(id).execs.Add(1)
		r.tr.slot(id).ok.Store(true)
	}
	good := countRows(r, map[string]int64{"p:k1": 1, "p:k2": 1, "p:k3": 1})
	if !good.OK || good.Rows != 3 || good.Keys != 3 {
		t.Fatalf("one row per key: %+v", good)
	}
	bad := countRows(r, map[string]int64{"p:k1": 2, "p:k3": 1, "p:k4": 1, "other": 1})
	if bad.OK || bad.Twice != 1 || bad.Missing != 1 || bad.Stray != 2 || len(bad.Examples) != 4 {
		t.Fatalf("two rows, a missing row, two stray rows: %+v", bad)
	}
	if c := rowsCell(bad); !strings.Contains(c, "1 key with more than one row!") || !strings.Contains(c, "2 stray rows!") {
		t.Errorf("rows cell %q", c)
	}
}

// The tx systems run in the tx scenarios on PostgreSQL only, and the tx
// scenarios run nothing else.
func TestTxRunsIn(t *testing.T) {
	for _, c := range []struct {
		system, store, scenario string
		want                    bool
	}{
		{"pgtx", "postgres", "tx-unique", true},
		{"by-hand", "postgres", "tx-dup", true},
		{"idem", "postgres", "tx-dup", true},
		{"plain", "postgres", "tx-unique", false},
		{"pgtx", "postgres", "unique", false},
		{"by-hand", "postgres", "xstorm", false},
		{"idem", "redis", "tx-unique", false},
		{"idem", "memory", "tx-unique", false},
	} {
		if got := runsIn(c.system, c.store, c.scenario); got != c.want {
			t.Errorf("runsIn(%s, %s, %s) = %v", c.system, c.store, c.scenario, got)
		}
	}
	var out bytes.Buffer
	printSkipped(&out, "tx-unique", []string{"redis"})
	if !strings.Contains(out.String(), "-postgres") {
		t.Errorf("skipped tx-unique: %q", out.String())
	}
}

// readReport reads dir/report.json.
func readReport(t *testing.T, dir string) Report {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var rep Report
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}
