package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// The exit codes.
const (
	exitOK         = 0
	exitFailed     = 1 // the store unreachable or failing
	exitUsage      = 2
	exitNoRecord   = 3 // absent, or a Redis key that is not idem's
	exitInProgress = 4 // get has no result yet; forget refused
)

// exitError ends the command with an exit code and a message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// run runs the command line args (without the program name), writing its
// output to stdout and its errors to stderr, and returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := parseArgs(args)
	if errors.Is(err, errHelp) {
		fmt.Fprint(stdout, usageText)
		return exitOK
	}
	if err != nil {
		return report(stderr, err)
	}
	c, err := connect(ctx, cfg)
	if err != nil {
		return report(stderr, err)
	}
	defer c.close()
	out := &printer{w: stdout, note: stderr, json: cfg.json}
	switch cfg.cmd {
	case "get":
		err = cmdGet(ctx, c, cfg, out)
	case "state":
		err = cmdState(ctx, c, cfg, out)
	case "forget":
		err = cmdForget(ctx, c, cfg, out)
	case "list":
		err = cmdList(ctx, c, cfg, out)
	case "clear":
		err = cmdClear(ctx, c, cfg, out)
	case "stats":
		err = cmdStats(ctx, c, cfg, out)
	}
	if err == nil {
		err = out.err
	}
	return report(stderr, err)
}

// report writes err to stderr and returns its exit code.
func report(stderr io.Writer, err error) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintf(stderr, "idem: %v\n", err)
	var (
		ue *usageError
		ee *exitError
	)
	switch {
	case errors.As(err, &ue):
		fmt.Fprintln(stderr, "Run idem -h for the commands and flags.")
		return exitUsage
	case errors.As(err, &ee):
		return ee.code
	}
	return exitFailed
}

// printer writes a command's output, remembering the first write error,
// and notes that are not output to stderr.
type printer struct {
	w    io.Writer
	note io.Writer
	json bool
	err  error
}

func (p *printer) notef(format string, args ...any) {
	fmt.Fprintf(p.note, "idem: "+format+"\n", args...)
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

// field writes one "label  value" line of a human report.
func (p *printer) field(label string, format string, args ...any) {
	p.printf("%-12s %s\n", label, fmt.Sprintf(format, args...))
}

func (p *printer) encode(v any) {
	if p.err == nil {
		enc := json.NewEncoder(p.w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		p.err = enc.Encode(v)
	}
}
