// Command wasmhist runs an agent whose chat history is kept by a wasmhist
// plugin, and checks plugins and sessions.
//
//	wasmhist chat --plugin sqlite --session chat.json -m "I like Italian food"
//	wasmhist history --session chat.json
//	wasmhist inspect plugins/inmemory/inmemory.wasm
//	wasmhist conformance myplugin.wasm
//	wasmhist session validate chat.json
//
// Every command takes --help (usage, flags, examples); 'wasmhist help
// COMMAND' adds the details, and 'wasmhist completion bash|zsh|fish' prints
// a shell completion script. Every failure is one line on standard error,
// "wasmhist <command>: what failed, where, what to do", and a non-zero exit
// status: 1 when the command failed, 2 when it was called wrongly, 130 when
// it was interrupted (Ctrl-C, SIGINT).
//
// Ctrl-C during a model or plugin call cancels that call, and with it the
// turn: per-run persistence stores nothing of it, per-service-call
// persistence keeps the calls that completed. In an interactive chat the
// prompt comes back; anywhere else, and at the prompt, the command ends with
// status 130. The session file always holds the last commit.
//
// An interactive chat (standard input a terminal) reports a failed turn and
// returns to its prompt, as psql does; it ends at Ctrl-D or /exit, with
// status 1 when its last turn failed. Piped input stops at the first failure.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
)

// Exit statuses.
const (
	exitOK    = 0
	exitFail  = 1
	exitUsage = 2
	// exitInterrupted is the shells' convention for a program ended by
	// SIGINT: 128 + the signal's number.
	exitInterrupted = 130
)

// errDescribed ends a command run only to describe its flags (env.describe).
var errDescribed = errors.New("described")

// errInterrupted is the cause of a context cancelled by Ctrl-C.
var errInterrupted = errors.New("interrupted")

// env is what a command reads and writes, so that the commands do not
// reach for globals.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	getenv         func(string) string
	// interrupts delivers Ctrl-C (SIGINT); nil when nothing interrupts.
	interrupts <-chan os.Signal
	// details: 'wasmhist help CMD' asked for the details of a command's help.
	details bool
	// describe, when set, receives the flag set a command builds, and
	// the command returns errDescribed instead of running: this is how
	// completion learns each command's flags.
	describe func(*flags)
	// uncached is the temporary compile cache of this run, when the
	// user's cannot be used (see hostCacheDir); run removes it.
	uncached string
}

// command is one subcommand.
type command struct {
	name    string
	summary string
	run     func(ctx context.Context, e *env, args []string) error
	// handlesInterrupts: the command reads e.interrupts itself (chat,
	// whose Ctrl-C means different things at the prompt and in a call);
	// every other command's context is cancelled by the first one.
	handlesInterrupts bool
}

func commands() []command {
	return []command{
		{name: "chat", summary: "talk to an agent whose history a plugin keeps", run: runChat, handlesInterrupts: true},
		{name: "history", summary: "print the history a session's plugin stored", run: runHistory},
		{name: "inspect", summary: "describe a plugin binary: ABI, exports, capabilities, schemas, sha256", run: runInspect},
		{name: "conformance", summary: "run the conformance suite against a plugin binary", run: runConformance},
		{name: "new", summary: "write a new plugin module (new plugin NAME) that builds and passes conformance", run: runNew},
		{name: "session", summary: "validate, list, show, delete, export, import, fork, migrate or prune sessions", run: runSession},
		{name: "postgres", summary: "rotate the host key of a PostgreSQL database (postgres rotate-key), hosts running", run: runPostgres},
		{name: "cache", summary: "show or clear the compile cache of plugins (cache show, cache clear)", run: runCache},
		{name: "completion", summary: "print a shell completion script: completion bash, zsh or fish", run: runCompletion},
		{name: "version", summary: "print the versions of wasmhist, its ABI, Go, wazero and the Extism go-sdk", run: runVersion},
	}
}

func main() {
	interrupts := make(chan os.Signal, 1)
	signal.Notify(interrupts, os.Interrupt)
	code := run(context.Background(), os.Args[1:], &env{stdin: os.Stdin, stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, interrupts: interrupts})
	os.Exit(code)
}

// cancelOnInterrupt returns ctx cancelled, with cause errInterrupted, at
// the next Ctrl-C. stop ends the watch and reports whether it took a
// Ctrl-C; one that arrives after stop stays for the next reader of
// e.interrupts, so that none is lost between two watches.
func cancelOnInterrupt(ctx context.Context, e *env) (_ context.Context, stop func() bool) {
	ctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	took := make(chan bool, 1)
	go func() {
		select {
		case <-e.interrupts:
			cancel(errInterrupted)
			took <- true
		case <-done:
			took <- false
		}
	}()
	return ctx, func() bool {
		close(done)
		t := <-took
		cancel(nil)
		return t
	}
}

// interrupted reports whether err or ctx's cause is a Ctrl-C.
func interrupted(ctx context.Context, err error) bool {
	return errors.Is(err, errInterrupted) || errors.Is(context.Cause(ctx), errInterrupted)
}

func run(ctx context.Context, args []string, e *env) int {
	if len(args) == 0 {
		fmt.Fprintln(e.stderr, "wasmhist: no command given: run 'wasmhist --help' for the list")
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		usage(e.stdout)
		return exitOK
	case "help":
		// "help chat" is "chat --help".
		if len(args) < 2 {
			usage(e.stdout)
			return exitOK
		}
		// "help session validate" is a subcommand's.
		if len(args) > 3 || len(args) == 3 && args[1] != "session" && args[1] != "new" {
			fmt.Fprintf(e.stderr, "wasmhist help: one command at a time: run 'wasmhist help %s'\n", args[1])
			return exitUsage
		}
		e.details = true
		name, args = args[1], append(slices.Clone(args[1:]), "--help")
	case completeCommand:
		return runComplete(e, args[1:])
	case "-version", "--version":
		name = "version"
	}
	for _, c := range commands() {
		if c.name != name {
			continue
		}
		cctx := ctx
		if !c.handlesInterrupts {
			var stop func() bool
			cctx, stop = cancelOnInterrupt(ctx, e)
			defer stop()
		}
		err := c.run(cctx, e, args[1:])
		if e.uncached != "" {
			os.RemoveAll(e.uncached)
		}
		switch {
		case err == nil:
			return exitOK
		case errors.Is(err, flag.ErrHelp):
			return exitOK
		}
		fmt.Fprintln(e.stderr, oneLine(err.Error()))
		var ue *usageError
		switch {
		case errors.As(err, &ue):
			return exitUsage
		case interrupted(cctx, err):
			return exitInterrupted
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
	fmt.Fprintln(w, "Examples:")
	fmt.Fprintln(w, "  wasmhist chat --plugin sqlite --session trip.json -m \"I like Rome\"")
	fmt.Fprintln(w, "  wasmhist history --session trip.json")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "Run 'wasmhist <command> --help' for a command's flags, 'wasmhist help <command>' for its details.")
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

// refuseConnStrings refuses a --db or --session (from the command line
// or a configuration file) that looks like a connection string, without
// repeating it: --db names an SQLite file and --session a file or an id,
// so such a value is a mistake that would leave a password in ps, shell
// history, a session's provenance and every message naming the value.
func refuseConnStrings(fs *flags, cmd string, positional []string) error {
	if strings.HasPrefix(cmd, "session") || cmd == "history" {
		// Their arguments are session files or ids, as --session is.
		for _, a := range positional {
			if looksLikeConnString(a) {
				return usagef(cmd, "a session argument takes no connection string (ps and shell history would show its password): it names a session file or, with --store, a session's id; to keep sessions in PostgreSQL put the connection string in $%s and pass --store postgres", postgresDSNEnv)
			}
		}
	}
	for _, name := range []string{"db", "session"} {
		f := fs.Lookup(name)
		if f == nil || !looksLikeConnString(f.Value.String()) {
			continue
		}
		if name == "db" {
			return usagef(cmd, "%s takes no connection string (ps and shell history would show its password): to keep the plugin's history in PostgreSQL put it in $%s and pass --db postgres, or in another variable and pass --db env:VAR; else --db names an SQLite file", fs.origin(name), postgresDSNEnv)
		}
		return usagef(cmd, "%s takes no connection string (ps and shell history would show its password): --session names a session file or, with --store, a session's id; to keep sessions in PostgreSQL put the connection string in $%s and pass --store postgres", fs.origin(name), postgresDSNEnv)
	}
	return nil
}

// redactConnStrings replaces in msg each of args that looks like a
// connection string, for a parse error that quotes a flag's value.
func redactConnStrings(msg string, args []string) string {
	for _, a := range args {
		_, v, _ := strings.Cut(a, "=") // --flag=value
		for _, s := range []string{a, v} {
			if s != "" && looksLikeConnString(s) {
				msg = strings.ReplaceAll(msg, s, "(a connection string)")
			}
		}
	}
	return msg
}

// flags is a command's flag set and its help text.
type flags struct {
	*flag.FlagSet
	cmd  string
	text helpText
	e    *env
	// fromFile holds the flags the configuration file set: the file and
	// the value, so that a message about a value names where it came from.
	fromFile map[string]fileValue
}

// fileValue is a flag's value as a configuration file set it.
type fileValue struct{ path, value string }

// origin names where the flag called name got its value, for messages:
// --NAME, or the key of the configuration file that set it (unless the
// command line changed it since).
func (fs *flags) origin(name string) string {
	if fv, ok := fs.fromFile[name]; ok {
		if f := fs.Lookup(name); f != nil && f.Value.String() == fv.value {
			return fmt.Sprintf("%q in configuration file %s", name, fv.path)
		}
	}
	return "--" + name
}

// originValue is origin with the flag's value: --NAME VALUE, or
// "NAME": "VALUE" in configuration file F.
func (fs *flags) originValue(name string) string {
	f := fs.Lookup(name)
	if f == nil {
		return "--" + name
	}
	if o := fs.origin(name); !strings.HasPrefix(o, "--") {
		return fmt.Sprintf("%q: %q in configuration file %s", name, f.Value.String(), fs.fromFile[name].path)
	}
	return "--" + name + " " + f.Value.String()
}

// helpText is a command's help. 'wasmhist CMD --help' prints the usage
// line, the summary, one line per flag and the examples; 'wasmhist help
// CMD' adds the details.
type helpText struct {
	usage    string   // the arguments after "wasmhist CMD"
	summary  string   // what the command does, in at most three lines
	examples []string // command lines; each is in docs/commands.md, whose examples a test runs
	details  string   // for 'wasmhist help CMD': what a user needs beyond the summary
}

// flagSet returns a flag set for cmd whose --help prints h, and whose
// parse errors become one-line usage errors (flag's own usage dump on a
// bad flag would bury the one line that says what was wrong).
func flagSet(e *env, cmd string, h helpText) *flags {
	fs := flag.NewFlagSet("wasmhist "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.String(configFileFlag, "", "read flag values from a JSON `FILE` (default $"+configFileEnv+")")
	return &flags{FlagSet: fs, cmd: cmd, text: h, e: e}
}

// help prints the command's help to standard output, with the details
// when e.details asks for them ('wasmhist help CMD').
func (fs *flags) help() {
	w, h := fs.e.stdout, fs.text
	fmt.Fprintf(w, "Usage: wasmhist %s\n\n%s\n", strings.TrimSpace(fs.cmd+" "+h.usage), h.summary)
	type row struct{ left, right string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		value, usage := flag.UnquoteUsage(f)
		left := "--" + f.Name
		if len(f.Name) == 1 {
			left = "-" + f.Name
		}
		if value != "" {
			left += " " + value
		}
		if d := f.DefValue; d != "" && d != "0" && d != "false" {
			usage += " (default " + d + ")"
		}
		rows = append(rows, row{left, usage})
		width = max(width, len(left))
	})
	if len(rows) > 0 {
		fmt.Fprintln(w, "\nFlags:")
		for _, r := range rows {
			fmt.Fprintf(w, "  %-*s  %s\n", width, r.left, r.right)
		}
	}
	if len(h.examples) > 0 {
		fmt.Fprintln(w, "\nExamples:")
		for _, x := range h.examples {
			fmt.Fprintln(w, "  "+x)
		}
	}
	switch {
	case h.details == "":
	case fs.e.details:
		fmt.Fprintf(w, "\nDetails:\n%s\n", h.details)
	default:
		fmt.Fprintf(w, "\nRun 'wasmhist help %s' for the details.\n", fs.cmd)
	}
}

// given reports whether the flag called name was set on the command line,
// as opposed to holding its default.
func (fs *flags) given(name string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) { found = found || f.Name == name })
	return found
}

// parse parses args, flags and positional arguments in any order (flag
// alone stops at the first positional one, and "inspect x.wasm --json"
// is how people type), and returns the positional arguments. A parse error
// becomes a usage error; --help prints the usage and returns flag.ErrHelp.
func parse(fs *flags, cmd string, args []string) ([]string, error) {
	if fs.e.describe != nil {
		fs.e.describe(fs)
		return nil, errDescribed
	}
	if err := applyConfigFile(fs, cmd, args); err != nil {
		return nil, err
	}
	var positional []string
	for {
		err := fs.Parse(args)
		switch {
		case errors.Is(err, flag.ErrHelp):
			fs.help()
			return nil, flag.ErrHelp
		case err != nil:
			return nil, usagef(cmd, "%s: run 'wasmhist %s --help' for the flags", redactConnStrings(err.Error(), args), cmd)
		}
		args = fs.Args()
		if len(args) == 0 {
			return positional, refuseConnStrings(fs, cmd, positional)
		}
		if args[0] == "--" {
			positional = append(positional, args[1:]...)
			return positional, refuseConnStrings(fs, cmd, positional)
		}
		positional = append(positional, args[0])
		args = args[1:]
	}
}
