// Command wasmhist runs an agent whose chat history is kept by a wasmhist
// plugin, and checks plugins and sessions.
//
//	wasmhist chat --plugin sqlite --session chat.json -m "I like Italian food"
//	wasmhist history --session chat.json
//	wasmhist inspect plugins/inmemory/inmemory.wasm
//	wasmhist conformance myplugin.wasm
//	wasmhist session validate chat.json
//
// Every command takes --help. Every failure is one line on standard error,
// "wasmhist <command>: what failed, where, what to do", and a non-zero exit
// status: 1 when the command failed, 2 when it was called wrongly.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
)

// env is what a command reads and writes, so that the commands do not
// reach for globals.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) error
}

func commands() []command {
	return []command{
		{"chat", "talk to an agent whose history a plugin keeps", runChat},
		{"history", "print the history a session's plugin stored", runHistory},
		{"inspect", "describe a plugin binary: ABI, exports, capabilities, schemas, sha256", runInspect},
		{"conformance", "run the conformance suite against a plugin binary", runConformance},
		{"session", "work with session files (session validate FILE)", runSession},
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	code := run(ctx, os.Args[1:], &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv})
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, e *env) int {
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, "wasmhist: no command given: run 'wasmhist --help' for the list")
		return exitUsage
	}
	name := args[0]
	if name == "-h" || name == "-help" || name == "--help" || name == "help" {
		usage(e.stdout)
		return exitOK
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		err := c.run(ctx, e, args[1:])
		switch {
		case err == nil:
			return exitOK
		case errors.Is(err, flag.ErrHelp):
			return exitOK
		}
		fmt.Fprintln(e.stderr, oneLine(err.Error()))
		var ue *usageError
		if errors.As(err, &ue) {
			return exitUsage
		}
		return exitFail
	}
	fmt.Fprintf(e.stderr, "wasmhist: unknown command %q: run 'wasmhist --help' for the list\n", name)
	return exitUsage
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "wasmhist runs an agent whose chat history is kept by a sandboxed WebAssembly plugin.")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Usage: wasmhist <command> [flags] [arguments]")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Commands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-12s %s\n", c.name, c.summary)
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'wasmhist <command> --help' for a command's flags.")
}

// usageError is a command called wrongly (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usagef reports a wrong call of cmd; the message should say how to call it.
func usagef(cmd, format string, args ...any) error {
	return &usageError{msg: "wasmhist " + cmd + ": " + fmt.Sprintf(format, args...)}
}

// failf reports a failure of cmd. Format it as "what failed, where: why:
// what to do"; %w keeps the cause inspectable.
func failf(cmd, format string, args ...any) error {
	return fmt.Errorf("wasmhist "+cmd+": "+format, args...)
}

// oneLine folds a message onto one line: errors from deeper layers (a build
// log, a guest's stderr) may carry newlines, and a caller reading our
// standard error expects one line per failure.
func oneLine(s string) string {
	s = strings.TrimSpace(s)
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	fields := strings.FieldsFunc(s, func(r rune) bool { return r == '\n' || r == '\r' })
	for i := range fields {
		fields[i] = strings.TrimSpace(fields[i])
	}
	return strings.Join(fields, " | ")
}

// flags is a command's flag set and its help text.
type flags struct {
	*flag.FlagSet
	help func()
}

// flagSet returns a flag set for cmd whose --help prints the synopsis, the
// description and the flags to standard output, and whose parse errors
// become one-line usage errors (flag's own usage dump on a bad flag would
// bury the one line that says what was wrong).
func flagSet(e *env, cmd, synopsis, description string) *flags {
	fs := flag.NewFlagSet("wasmhist "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	help := func() {
		w := e.stdout
		fmt.Fprintf(w, "Usage: wasmhist %s %s\n\n%s\n", cmd, synopsis, description)
		n := 0
		fs.VisitAll(func(*flag.Flag) { n++ })
		if n > 0 {
			fmt.Fprintln(w, "\nFlags:")
			fs.SetOutput(w)
			fs.PrintDefaults()
			fs.SetOutput(io.Discard)
		}
	}
	return &flags{FlagSet: fs, help: help}
}

// parse parses args, flags and positional arguments in any order (flag
// alone stops at the first positional one, and "inspect x.wasm --json"
// is how people type), and returns the positional arguments. A parse error
// becomes a usage error; --help prints the usage and returns flag.ErrHelp.
func parse(fs *flags, cmd string, args []string) ([]string, error) {
	var positional []string
	for {
		err := fs.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			fs.help()
			return nil, flag.ErrHelp
		case err != nil:
			return nil, usagef(cmd, "%v: run 'wasmhist %s --help' for the flags", err, cmd)
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, nil
		}
		if args[0] == "--" {
			return append(positional, args[1:]...), nil
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}
