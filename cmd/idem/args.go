package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// config is a parsed command line.
type config struct {
	redisURL    string
	cluster     string
	storePrefix string
	postgres    string
	table       string
	schema      string
	timeout     time.Duration

	namespace, version string
	scoped             bool // -namespace or -version given
	allVersions        bool
	keyPrefix          string
	redisKey           bool

	json   bool
	dryRun bool
	yes    bool
	all    bool // clear: an empty scope, every key of the store prefix
	page   int
	full   bool

	// list
	state string
	limit int
	after string

	cmd  string
	args []string
}

const usageText = `idem reads and cleans up idem's records in Redis, Redis Cluster or PostgreSQL.

Usage:
  idem [flags] get KEY     the stored result: the value (text, or base64 when
                           not printable UTF-8; an HTTP response stored by
                           httpidem as status, headers and body), or the
                           permanent error
  idem [flags] state KEY   absent, in progress (lease left, owner), completed
                           or failed, with times and fingerprint
  idem [flags] forget KEY  delete the key's result (refused while in
                           progress); -dry-run says what it would delete
  idem [flags] list        the keys of the scope with their state, -limit at
                           a time: -state picks completed, failed,
                           in-progress or expired-lease (in progress, lease
                           ended without a result: crashed work)
  idem [flags] clear       delete the results of the scope: -dry-run lists
                           them, -yes deletes them; keys in progress are skipped
                           (an empty scope, every key, also needs -all)
  idem [flags] stats       the scope's records by state, value sizes, TTL left

Flags go before or after the command; put -- before a KEY that starts with -.

Connection (one store):
  -redis ADDR        one Redis server: host:port, or
                     redis://[user:password@]host:port/db, rediss:// for
                     TLS (default redis://127.0.0.1:6379/0)
  -cluster NODES     a Redis Cluster instead: host:port,host:port,... or
                     redis://[user:password@]host:port?addr=host:port&addr=...
  -store-prefix P    the Redis store's KeyPrefix (redisstore.Options)
                     (default "idem:")
  -postgres DSN      a PostgreSQL store instead: postgres://user:pass@host:port/db
                     or "host=... dbname=..." (pgx's forms)
  -table T           -postgres: the store's table (pgstore.Options) (default "idem")
  -schema S          -postgres: the table's schema (default: the search_path)
  -timeout D         bound on reaching the store and on each request (default 5s)

Keys:
  -namespace NS      with -version: KEY is scoped as store.BuildKey(KEY, scope)
  -version V         and list/clear/stats cover that scope only; without
                     either, KEY is the key as the store holds it (for
                     example ff:idemp:tenant-a:v1:order-1) and list/clear/
                     stats cover every key of the store
  -all-versions      list/clear/stats: every version of -namespace
  -key-prefix P      list/clear/stats: only keys starting with P (within
                     the scope; not with -all-versions)
  -redis-key         KEY is a Redis key name as redis-cli lists it,
                     such as idem:v3{ff:idemp:tenant-a:v1:order-1}

Output:
  -json              JSON on stdout instead of text
  -full              get: an HTTP response's whole body (cut past 4 KiB
                     otherwise; sensitive headers are redacted either way)
  -state S           list: all (default), completed, failed, in-progress
                     or expired-lease
  -limit N           list: keys per page (default 100)
  -after CURSOR      list: the page after the one that printed CURSOR
  -dry-run           clear, forget: say what would be deleted, delete nothing
  -yes               clear: delete (required unless -dry-run)
  -page N            list/clear/stats: keys per store scan (default 500)

Exit codes: 0 done; 1 the store unreachable or failing; 2 bad usage;
3 no idem record for the key (absent, or a record that is not idem's);
4 the key is in progress (get has no result yet, forget refused).
`

// usageError is a bad command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{msg: fmt.Sprintf(format, args...)}
}

// errHelp asks for the usage text on stdout.
var errHelp = errors.New("help")

// parseArgs parses a command line (without the program name).
func parseArgs(args []string) (*config, error) {
	cfg := &config{}
	fs := flag.NewFlagSet("idem", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.StringVar(&cfg.redisURL, "redis", "redis://127.0.0.1:6379/0", "")
	fs.StringVar(&cfg.cluster, "cluster", "", "")
	fs.StringVar(&cfg.storePrefix, "store-prefix", "idem:", "")
	fs.StringVar(&cfg.postgres, "postgres", "", "")
	fs.StringVar(&cfg.table, "table", "", "")
	fs.StringVar(&cfg.schema, "schema", "", "")
	fs.BoolVar(&cfg.full, "full", false, "")
	fs.StringVar(&cfg.state, "state", "all", "")
	fs.IntVar(&cfg.limit, "limit", 100, "")
	fs.StringVar(&cfg.after, "after", "", "")
	fs.DurationVar(&cfg.timeout, "timeout", 5*time.Second, "")
	fs.StringVar(&cfg.namespace, "namespace", "", "")
	fs.StringVar(&cfg.version, "version", "", "")
	fs.BoolVar(&cfg.allVersions, "all-versions", false, "")
	fs.StringVar(&cfg.keyPrefix, "key-prefix", "", "")
	fs.BoolVar(&cfg.redisKey, "redis-key", false, "")
	fs.BoolVar(&cfg.json, "json", false, "")
	fs.BoolVar(&cfg.dryRun, "dry-run", false, "")
	fs.BoolVar(&cfg.yes, "yes", false, "")
	fs.BoolVar(&cfg.all, "all", false, "")
	fs.IntVar(&cfg.page, "page", 500, "")

	// The flag package stops at the first argument that is not a flag:
	// take it, and parse the rest again, so flags may follow the command.
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, errHelp
			}
			return nil, usagef("%v", err)
		}
		rest := fs.Args()
		if n := len(args) - len(rest); n > 0 && args[n-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		if len(rest) == 0 {
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	cfg.scoped = set["namespace"] || set["version"]
	if len(pos) == 0 {
		return nil, usagef("no command: want get, state, forget, list, clear or stats")
	}
	cfg.cmd, cfg.args = pos[0], pos[1:]
	return cfg, cfg.check(set)
}

// check rejects flags and arguments that do not fit the command.
func (cfg *config) check(set map[string]bool) error {
	keyCmd := slices.Contains([]string{"get", "state", "forget"}, cfg.cmd)
	scopeCmd := slices.Contains([]string{"list", "clear", "stats"}, cfg.cmd)
	switch {
	case !keyCmd && !scopeCmd:
		return usagef("unknown command %q: want get, state, forget, list, clear or stats", cfg.cmd)
	case keyCmd && len(cfg.args) != 1:
		return usagef("%s takes one KEY, got %d arguments", cfg.cmd, len(cfg.args))
	case !keyCmd && len(cfg.args) != 0:
		return usagef("%s takes no arguments, got %q", cfg.cmd, cfg.args)
	case set["postgres"] && strings.TrimSpace(cfg.postgres) == "", set["cluster"] && strings.TrimSpace(cfg.cluster) == "",
		set["redis"] && strings.TrimSpace(cfg.redisURL) == "":
		// An unset variable (-postgres "$DSN"): not the default Redis.
		return usagef("-redis, -cluster or -postgres is empty: name the store")
	case set["redis"] && set["cluster"]:
		return usagef("-redis and -cluster are both set; give one")
	case set["postgres"] && (set["redis"] || set["cluster"] || set["store-prefix"]):
		return usagef("-postgres names a PostgreSQL store: it takes no -redis, -cluster or -store-prefix")
	case !set["postgres"] && (set["table"] || set["schema"]):
		return usagef("-table and -schema apply to -postgres only")
	case cfg.timeout <= 0:
		return usagef("-timeout %v must be positive", cfg.timeout)
	case cfg.page <= 0:
		return usagef("-page %d must be positive", cfg.page)
	case cfg.cmd != "clear" && cfg.yes:
		return usagef("-dry-run and -yes apply to clear only (and -dry-run to forget)")
	case cfg.dryRun && cfg.cmd != "clear" && cfg.cmd != "forget":
		return usagef("-dry-run and -yes apply to clear only (and -dry-run to forget)")
	case cfg.cmd == "clear" && cfg.dryRun == cfg.yes:
		return usagef("clear deletes records: pass -dry-run to list what would go, or -yes to delete it")
	case keyCmd && (cfg.allVersions || set["key-prefix"]):
		return usagef("-all-versions and -key-prefix apply to list, clear and stats only")
	case cfg.cmd != "list" && (set["state"] || set["limit"] || set["after"]):
		return usagef("-state, -limit and -after apply to list only")
	case cfg.cmd == "list" && !slices.Contains(listStates, cfg.state):
		return usagef("-state %q: want one of %s", cfg.state, strings.Join(listStates, ", "))
	case cfg.limit <= 0:
		return usagef("-limit %d must be positive", cfg.limit)
	case cfg.after != "" && badCursor(cfg.after):
		return usagef("-after %q is not a cursor printed by list", cfg.after)
	case cfg.full && cfg.cmd != "get":
		return usagef("-full applies to get only")
	case !keyCmd && cfg.redisKey:
		return usagef("-redis-key applies to get, state and forget only")
	case cfg.redisKey && set["postgres"]:
		return usagef("-redis-key names a Redis key: not with -postgres")
	case cfg.redisKey && cfg.scoped:
		return usagef("-redis-key names the record itself: it takes no -namespace or -version")
	case cfg.all && cfg.cmd != "clear":
		return usagef("-all applies to clear only")
	case cfg.cmd == "clear" && cfg.yes && !cfg.all && cfg.namespace == "" && cfg.version == "" && cfg.keyPrefix == "":
		return usagef("clear with an empty scope (no -namespace, -version or -key-prefix, or empty ones) deletes every key of the store prefix: pass -all to mean it")
	case cfg.allVersions && (!set["namespace"] || set["version"] || set["key-prefix"]):
		return usagef("-all-versions needs -namespace, and takes no -version or -key-prefix")
	}
	return nil
}
