package doccheck

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
)

// root is the module's root, from this package's directory.
const root = "../.."

// fileEnv is what every block of a markdown file may assume: the imports
// its prose names and the variables it talks about.
var fileEnv = map[string]Env{
	"README.md": {
		Imports: []string{"context", "fmt", "sync", "sync/atomic", "time", "github.com/idemrt/idem"},
		Decls:   `type Receipt struct { ID string; Amount int }`,
	},
	"docs/consumers.md": {
		Imports: []string{
			"context", "log", "math", "strconv", "time",
			"github.com/idemrt/idem", "github.com/idemrt/idem/consume",
			"github.com/idemrt/idem/consume/natsjs", "github.com/idemrt/idem/consume/natsjs/natstx",
			"github.com/idemrt/idem/pgtx", "github.com/idemrt/idem/store",
			"idemriver github.com/idemrt/idem/consume/river", "github.com/riverqueue/river",
			"github.com/idemrt/idem/store/pgstore",
			"github.com/jackc/pgx/v5", "github.com/jackc/pgx/v5/pgxpool",
			"github.com/nats-io/nats.go", "github.com/nats-io/nats.go/jetstream",
			"github.com/twmb/franz-go/pkg/kgo", "github.com/idemrt/idem/consume/kafka",
			"github.com/idemrt/idem/consume/kafka/kafkatx",
			"github.com/aws/aws-sdk-go-v2/service/sqs", "idemsqs github.com/idemrt/idem/consume/sqs",
		},
		Decls: `
var (
	ctx                 context.Context
	rt                  *idem.Runtime
	c                   *consume.Consumer
	redisStore          store.Store
	storePool, workPool *pgxpool.Pool
	cons                jetstream.Consumer
	nc                  *nats.Conn
	cents               int64
	account             string
)`,
	},
	"docs/cqrs.md": {
		Imports: []string{"context", "github.com/idemrt/idem/cqrs"},
		Decls: `
var ctx context.Context
type ChargeCard struct { OrderID string; Cents int }
type GetBalance struct { Account string }
type Receipt struct { ID string }
func chargeCard(context.Context, ChargeCard) (Receipt, error) { return Receipt{}, nil }
func getBalance(context.Context, GetBalance) (int, error) { return 0, nil }`,
	},
	"docs/effects.md": {
		Imports: []string{"context", "github.com/idemrt/idem", "github.com/idemrt/idem/pgtx",
			"github.com/jackc/pgx/v5", "github.com/jackc/pgx/v5/pgxpool", "example.com/psp"},
		Decls: `
var (
	ctx      context.Context
	rt       *idem.Runtime
	workPool *pgxpool.Pool
	req      struct { ID, From, To string; Cents int64 }
)
type Receipt = psp.Receipt`,
	},
	"docs/flows.md": {
		Imports: []string{"context", "github.com/idemrt/idem", "github.com/idemrt/idem/flows"},
		Decls: `
var (
	ctx                context.Context
	rt                 *idem.Runtime
	requestID, tenant  string
	chargeCard, sendReceipt func(context.Context, Checkout) (Checkout, error)
	recordInLedger     func(context.Context, Checkout) error
)`,
	},
	"docs/http.md": {
		Imports: []string{
			"bytes", "context", "encoding/json", "io", "net/http", "time",
			"github.com/idemrt/idem/httpidem", "github.com/go-chi/chi/v5",
			"github.com/hashicorp/go-retryablehttp", "github.com/google/uuid",
		},
		Decls: `
var (
	ctx      context.Context
	mw       *httpidem.Middleware
	payments http.Handler
	r        *http.Request
	key      string
	url      string
	body     io.Reader
	client   *retryablehttp.Client
)
func principalFrom(context.Context) string { return "" }`,
	},
	"docs/operations.md": {
		Imports: []string{"log/slog", "github.com/idemrt/idem", "github.com/idemrt/idem/idemprom",
			"go.opentelemetry.io/otel", "github.com/prometheus/client_golang/prometheus"},
	},
	"docs/postgres.md": {
		Imports: []string{"context", "github.com/idemrt/idem", "github.com/idemrt/idem/store/pgstore",
			"github.com/jackc/pgx/v5/pgxpool"},
		Decls: `var ctx context.Context`,
	},
	"docs/redis.md": {
		Imports: []string{"context", "github.com/idemrt/idem", "github.com/idemrt/idem/store/redisstore",
			"github.com/redis/go-redis/v9"},
		Decls: `var ctx context.Context`,
	},
}

// rule adds to the file's Env for the one block that contains has.
type rule struct {
	file, has string
	decls     string   // more package-level declarations
	results   string   // Env.Results
	fields    string   // Env.Fields
	before    []string // Env.Before: the blocks containing these
	sketch    string   // not compiled, and why
}

var rules = []rule{
	{file: "docs/consumers.md", has: "natsjs.ForConsumer(cons,",
		decls: `func charge(context.Context, string, []byte) error { return nil }`},
	{file: "docs/consumers.md", has: "type txKey struct{}",
		decls: `var d consume.Delivery; var r *kgo.Record
func apply(context.Context, pgx.Tx, []byte) error { return nil }`},
	{file: "docs/consumers.md", has: "kafka.New(kafka.Options{",
		decls: `func charge(context.Context, string, []byte) error { return nil }`},
	{file: "docs/consumers.md", has: "idemsqs.New(",
		decls: `var client *sqs.Client; var queueURL string
func charge(context.Context, string, string) error { return nil }`},
	{file: "docs/consumers.md", has: "idemriver.NewTxWorker(ctx, workPool",
		decls: `var workers *river.Workers`, before: []string{"func (ChargeArgs) Kind() string"}},
	{file: "docs/flows.md", has: "flows.Reduce(\"refund\"", before: []string{"type Checkout struct"}},
	{file: "docs/http.md", has: "http.StatusNotFound || httpidem.DefaultStoreStatus", fields: "httpidem.Options"},
	{file: "docs/http.md", has: "http.StatusUnprocessableEntity || httpidem.DefaultStoreStatus", fields: "httpidem.Options"},
	{file: "docs/http.md", has: "RouteMiss:", fields: "httpidem.Options"},
	{file: "docs/http.md", has: "CredentialHeaders: []string{\"Authorization\"", fields: "httpidem.Options"},
	{file: "docs/http.md", has: "Fingerprint: func(", fields: "httpidem.Options"},
}

// stubs declare the few names the recipes use from packages this module
// does not depend on (an imaginary payment provider), so that the idem calls around them are still checked. The
// stubs follow the real APIs' shapes for what the blocks use, no more.
var stubs = map[string]string{
	"example.com/psp": `package psp
import "context"
type ChargeRequest struct { IdempotencyKey string; Amount int64 }
type Receipt struct { ID string }
func Charge(context.Context, ChargeRequest) (Receipt, error) { return Receipt{}, nil }`,
}

// markdown returns the files whose ```go blocks are checked: the README
// and docs/*.md.
func markdown(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files := []string{"README.md"}
	for _, d := range docs {
		files = append(files, "docs/"+filepath.Base(d))
	}
	return files
}

var (
	checkerOnce sync.Once
	checker     *Checker
	checkerErr  error
)

// newChecker returns the tests' one checker: a single go list for all.
func newChecker(t *testing.T) *Checker {
	t.Helper()
	checkerOnce.Do(func() { checker, checkerErr = buildChecker() })
	if checkerErr != nil {
		t.Fatal(checkerErr)
	}
	return checker
}

func buildChecker() (*Checker, error) {
	var paths []string
	for _, e := range fileEnv {
		for _, im := range e.Imports {
			_, path, ok := strings.Cut(im, " ")
			if !ok {
				path = im
			}
			if !slices.Contains(paths, path) {
				paths = append(paths, path)
			}
		}
	}
	return NewChecker(root, paths, stubs)
}

// TestDocs compiles every ```go block of the README and docs/ against the
// module as it is now.
func TestDocs(t *testing.T) {
	c := newChecker(t)
	used := make([]bool, len(rules))
	compiled := 0
	for _, file := range markdown(t) {
		text, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := Extract(file, text)
		if err != nil {
			t.Fatal(err)
		}
		if len(blocks) == 0 {
			continue
		}
		base, ok := fileEnv[file]
		if !ok {
			t.Errorf("%s has ```go blocks but no entry in fileEnv: add what its blocks assume", file)
			continue
		}
		for _, b := range blocks {
			env := base
			var matched []int
			for i, r := range rules {
				if r.file == file && strings.Contains(b.Code, r.has) {
					matched = append(matched, i)
				}
			}
			if len(matched) > 1 {
				t.Errorf("%s:%d: matches %d rules; make their has strings tell the blocks apart", file, b.Line, len(matched))
				continue
			}
			if len(matched) == 1 {
				i := matched[0]
				used[i] = true
				r := rules[i]
				if r.sketch != "" {
					t.Logf("%s:%d: a sketch, not compiled: %s", file, b.Line, r.sketch)
					continue
				}
				env.Decls += "\n" + r.decls
				env.Results, env.Fields = r.results, r.fields
				for _, has := range r.before {
					var found bool
					for _, p := range blocks {
						if strings.Contains(p.Code, has) {
							env.Before, found = append(env.Before, p), true
							break
						}
					}
					if !found {
						t.Errorf("%s:%d: no block of the file contains %q", file, b.Line, has)
					}
				}
			}
			compiled++
			for _, err := range c.Check(b, env) {
				t.Errorf("%v", err)
			}
		}
	}
	t.Logf("compiled %d blocks", compiled)
	for i, r := range rules {
		if !used[i] {
			t.Errorf("rule for %s %q matches no block: remove or update it", r.file, r.has)
		}
	}
}

// TestCheckerCatchesDrift shows that a name the module does not have
// fails the check, in each form a block takes, and that the errors name
// the markdown line.
func TestCheckerCatchesDrift(t *testing.T) {
	c := newChecker(t)
	env := fileEnv["docs/http.md"]
	cases := []struct {
		name string
		code string
		env  Env
		want string
	}{
		{"statements", "rt, err := idem.New(idem.Options{})\n_ = rt.ForgetAll(ctx)\n", fileEnv["README.md"], "ForgetAll"},
		{"function", "func f(ctx context.Context) {\n\tidem.Doo(ctx)\n}\n", fileEnv["README.md"], "Doo"},
		{"fields", "StoreStatuses: nil,\n", Env{Imports: env.Imports, Decls: env.Decls, Fields: "httpidem.Options"}, "StoreStatuses"},
		{"signature", "mw, err := httpidem.New(httpidem.Options{}, nil)\n", env, "too many arguments"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			errs := c.Check(Block{File: "x.md", Line: 10, Code: tc.code}, tc.env)
			if len(errs) == 0 {
				t.Fatalf("no error for %q", tc.code)
			}
			if s := errs[0].Error(); !strings.Contains(s, tc.want) || !strings.HasPrefix(s, "x.md:1") {
				t.Errorf("error %q: want it at x.md:1x and naming %q", s, tc.want)
			}
		})
	}
	t.Run("README renamed", func(t *testing.T) {
		// The README's own block, as if idem.WithOutcome had been renamed.
		text, err := os.ReadFile(filepath.Join(root, "README.md"))
		if err != nil {
			t.Fatal(err)
		}
		blocks, err := Extract("README.md", text)
		if err != nil || len(blocks) == 0 {
			t.Fatalf("README blocks: %v, %v", blocks, err)
		}
		b := blocks[0]
		if errs := c.Check(b, fileEnv["README.md"]); len(errs) != 0 {
			t.Fatalf("the README block itself fails: %v", errs)
		}
		if !strings.Contains(b.Code, "idem.WithOutcome(") {
			t.Skip("the README block no longer calls idem.WithOutcome; pick another name")
		}
		b.Code = strings.ReplaceAll(b.Code, "idem.WithOutcome(", "idem.WithResultOutcome(")
		errs := c.Check(b, fileEnv["README.md"])
		if len(errs) == 0 || !strings.Contains(errs[0].Error(), "WithResultOutcome") || !strings.HasPrefix(errs[0].Error(), "README.md:") {
			t.Errorf("renamed call: errors %v, want one at README.md naming WithResultOutcome", errs)
		}
	})
	t.Run("clean", func(t *testing.T) {
		code := "rt, err := idem.New(idem.Options{}) // unused: fine\nif err != nil { ... }\n"
		if errs := c.Check(Block{File: "x.md", Line: 1, Code: code}, fileEnv["README.md"]); len(errs) != 0 {
			t.Errorf("errors for a correct fragment: %v", errs)
		}
	})
}

func TestExtract(t *testing.T) {
	md := "text\n```go\na := 1\n```\n- item\n  ```go\n  b := 2\n  ```\n```sh\nls\n```\n"
	bs, err := Extract("f.md", []byte(md))
	if err != nil {
		t.Fatal(err)
	}
	if len(bs) != 2 || bs[0].Line != 3 || bs[0].Code != "a := 1\n" || bs[1].Line != 7 || bs[1].Code != "b := 2\n" {
		t.Errorf("got %+v", bs)
	}
}
