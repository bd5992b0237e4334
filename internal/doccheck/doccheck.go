// Package doccheck type-checks the ```go blocks of markdown files against
// the module, so that a renamed or removed API fails a test instead of
// misleading a reader.
//
// A block is rarely a whole program: it assumes a ctx, a runtime, a type
// its prose introduced. The caller supplies those assumptions as Go source
// (an [Env]) and the checker builds one small package per block:
//
//	package doc
//	import (...)          // Env.Imports
//	...                   // Env.Decls
//	func _() (Env.Results) {
//	    <the block>
//	}
//
// A block that does not parse as statements is read as top-level
// declarations (a func, a type); [Env.Fields] reads it as the fields of a
// composite literal instead. Type declarations at the top of a statement
// block move to package level, so the Env's declarations may use them.
// "{ ... }" in a block stands for an elided body and is read as
// `{ panic("elided") }`.
//
// The packages are type-checked with go/types against export data that
// `go list -export` produces (so against the build cache, one go command
// for all blocks). Unused variables and imports are ignored: fragments
// declare what they do not go on to use. Packages a block imports that are
// not in the module's graph (a payment provider)
// can be given as stub sources, so the module's API in such a block is
// still checked.
package doccheck

import (
	"bufio"
	"bytes"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"regexp"
	"sort"
	"strings"
)

// Block is one ```go block of a markdown file.
type Block struct {
	File string // as given to Extract
	Line int    // of the block's first line of code (1-based)
	Code string // with the fence's indentation removed
}

// Extract returns the ```go blocks of the markdown text, in order.
func Extract(file string, text []byte) ([]Block, error) {
	var (
		out    []Block
		cur    *Block
		indent string
		buf    strings.Builder
	)
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimLeft(line, " \t")
		if cur == nil {
			if info, ok := strings.CutPrefix(trimmed, "```"); ok && (info == "go" || strings.HasPrefix(info, "go ")) {
				indent = line[:len(line)-len(trimmed)]
				cur = &Block{File: file, Line: n + 1}
				buf.Reset()
			}
			continue
		}
		if strings.TrimSpace(line) == "```" {
			cur.Code = buf.String()
			out = append(out, *cur)
			cur = nil
			continue
		}
		buf.WriteString(strings.TrimPrefix(line, indent))
		buf.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: ```go block never closed", file, cur.Line-1)
	}
	return out, nil
}

// Env is what a block assumes.
type Env struct {
	// Imports are import specs: "net/http", or "name path" for a
	// package whose name differs from its path's last element. Unused
	// ones are fine.
	Imports []string
	// Decls are package-level declarations: the variables, types and
	// functions the block uses without declaring.
	Decls string
	// Results is the result list of the function a statement block runs
	// in, for a block that returns ("error").
	Results string
	// Fields, when set, reads the block as the fields of a composite
	// literal of this type ("httpidem.Options").
	Fields string
	// Before are blocks whose statements come first in the same
	// function (a fragment continuing an earlier one).
	Before []Block
}

// Checker type-checks blocks. Build it with [NewChecker]. It is not safe
// for concurrent use (the importer caches what it loads).
type Checker struct {
	fset    *token.FileSet
	exports map[string]string // import path -> export data file
	stubs   map[string]string // import path -> Go source
	done    map[string]*types.Package
	gc      types.Importer
}

// NewChecker runs `go list -export` in dir (a directory of the module)
// for the given import paths and their dependencies. stubs maps the
// import paths of packages outside the module's graph to Go source
// declaring the part of their API the blocks use.
func NewChecker(dir string, paths []string, stubs map[string]string) (*Checker, error) {
	c := &Checker{
		fset:    token.NewFileSet(),
		exports: map[string]string{},
		stubs:   stubs,
		done:    map[string]*types.Package{},
	}
	var real []string
	for _, p := range paths {
		if _, ok := stubs[p]; !ok {
			real = append(real, p)
		}
	}
	sort.Strings(real)
	if len(real) > 0 {
		cmd := exec.Command("go", append([]string{"list", "-export", "-deps", "-f", "{{.ImportPath}}\t{{.Export}}"}, real...)...)
		cmd.Dir = dir
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("go list -export: %v\n%s", err, stderr.Bytes())
		}
		for line := range strings.SplitSeq(strings.TrimSpace(string(out)), "\n") {
			path, file, _ := strings.Cut(line, "\t")
			if file != "" {
				c.exports[path] = file
			}
		}
	}
	c.gc = importer.ForCompiler(c.fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := c.exports[path]
		if !ok {
			return nil, fmt.Errorf("no export data for %q (not listed for go list -export?)", path)
		}
		return os.Open(f)
	})
	return c, nil
}

// Import implements [types.Importer]: stubs first, then export data.
func (c *Checker) Import(path string) (*types.Package, error) {
	if p, ok := c.done[path]; ok {
		return p, nil
	}
	src, ok := c.stubs[path]
	if !ok {
		return c.gc.Import(path)
	}
	f, err := parser.ParseFile(c.fset, "stub:"+path, src, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	conf := types.Config{Importer: c}
	p, err := conf.Check(path, c.fset, []*ast.File{f}, nil)
	if err != nil {
		return nil, fmt.Errorf("stub %s: %v", path, err)
	}
	c.done[path] = p
	return p, nil
}

var elided = regexp.MustCompile(`\{ \.\.\. \}`)

// Check type-checks b in env and returns its errors, each naming the
// markdown file and line; none when the block compiles.
func (c *Checker) Check(b Block, env Env) []error {
	var src strings.Builder
	src.WriteString("package doc\n\nimport (\n")
	for _, im := range env.Imports {
		name, path, ok := strings.Cut(im, " ")
		if !ok {
			name, path = "", im
		}
		fmt.Fprintf(&src, "\t%s %q\n", name, path)
	}
	src.WriteString(")\n\n")
	src.WriteString(env.Decls)
	src.WriteString("\n")
	code := func(b Block) string {
		// A //line directive maps what follows to the markdown file, so
		// errors name the line a reader sees.
		return fmt.Sprintf("//line %s:%d\n%s\n", b.File, b.Line, elided.ReplaceAllString(b.Code, `{ panic("elided") }`))
	}
	var body strings.Builder
	for _, p := range env.Before {
		// An earlier block of declarations (a type and its methods) goes to
		// package level; one of statements goes before b in its function.
		if _, err := c.parse("package doc\n" + code(p)); err == nil {
			src.WriteString(code(p))
			continue
		}
		body.WriteString(code(p))
	}
	body.WriteString(code(b))

	var f *ast.File
	var err error
	switch {
	case env.Fields != "":
		f, err = c.parse(src.String() + "var _ = " + env.Fields + "{\n" + body.String() + "}\n")
	default:
		f, err = c.parse(src.String() + "func _() (" + env.Results + ") {\n" + body.String() + "}\n")
		if err != nil && len(env.Before) == 0 {
			// Not statements: perhaps declarations.
			if f2, err2 := c.parse(src.String() + body.String()); err2 == nil {
				f, err = f2, nil
			}
		}
	}
	if err != nil {
		return []error{err}
	}
	hoistTypes(f)

	var errs []error
	conf := types.Config{
		Importer: c,
		Error: func(err error) {
			if te, ok := err.(types.Error); ok && te.Soft {
				return // declared and not used, imported and not used
			}
			errs = append(errs, err)
		},
	}
	_, _ = conf.Check("doc", c.fset, []*ast.File{f}, nil)
	return errs
}

func (c *Checker) parse(src string) (*ast.File, error) {
	return parser.ParseFile(c.fset, "doc.go", src, parser.SkipObjectResolution)
}

// hoistTypes moves the type declarations at the top level of the body
// of the file's func _ to package level.
func hoistTypes(f *ast.File) {
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Name.Name != "_" || fd.Body == nil {
			continue
		}
		var keep []ast.Stmt
		for _, s := range fd.Body.List {
			if ds, ok := s.(*ast.DeclStmt); ok {
				if gd, ok := ds.Decl.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
					f.Decls = append(f.Decls, gd)
					continue
				}
			}
			keep = append(keep, s)
		}
		fd.Body.List = keep
	}
}
