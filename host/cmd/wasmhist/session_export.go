package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/conversation"
	"github.com/wasmhist/wasmhist/host/portable"
	"github.com/wasmhist/wasmhist/host/session"
)

// Formats of session export and import.
const (
	formatWasmhist = "wasmhist"
	formatOpenAI   = "openai"
)

// exportAttempts bounds how often export loads the session again when a
// chat committed while it read (conversation.ErrChanged) and nothing was
// written yet.
const exportAttempts = 5

func runSessionExport(ctx context.Context, e *env, args []string) error {
	const cmd = "session export"
	fs := flagSet(e, cmd, helpText{
		usage: "FILE|ID [--store STORE] [--format wasmhist|openai] [--raw] [flags]",
		summary: "Prints the session with its whole history as one portable document\n" +
			"(schemas/portable-session.json), which 'wasmhist session import' reads into any plugin and store.",
		examples: []string{
			"wasmhist session export trip.json > trip.portable.json",
			"wasmhist session export --format openai trip.json > trip.openai.json",
		},
		details: "  Each slot's history is read through its plugin's list export from the database the\n" +
			"  session records, all of one revision (a chat committing meanwhile makes it read again):\n" +
			"  the newest committed, also when the session is behind its database (nothing is written).\n" +
			"  --format openai prints one slot's history as an OpenAI Chat Completions messages array;\n" +
			"  --raw prints the session exactly as stored, without its history. On a terminal, a long\n" +
			"  read shows its progress on standard error.",
	})
	sf := addSlotFlags(fs)
	format := fs.String("format", formatWasmhist, "`FORMAT`: wasmhist (a portable document) or openai (messages)")
	raw := fs.Bool("raw", false, "print the session exactly as stored, without its history")
	key := fs.String("state-key", "", "with --format openai, the state `KEY` to print (default: the only slot)")
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	switch {
	case *format != formatWasmhist && *format != formatOpenAI:
		return usagef(cmd, "--format %q: use wasmhist or openai", *format)
	case *raw && (fs.given("format") || fs.given("plugin") || fs.given("db") || *key != ""):
		return usagef(cmd, "--raw prints the session as stored, without reading its history: drop --format, --plugin, --db and --state-key, or drop --raw")
	case *key != "" && *format != formatOpenAI:
		return usagef(cmd, "--state-key chooses the slot of --format openai: the portable document holds every slot")
	}
	a, err := sessionArgument(cmd, sf.store, pos)
	if err != nil {
		return err
	}
	defer a.close()
	if *raw {
		_, b, _, err := a.read(ctx, e)
		if err != nil {
			return err
		}
		if _, err := e.stdout.Write(b); err != nil {
			return failf(cmd, "writing %s to standard output: %w", a.where(""), err)
		}
		return nil
	}
	pr := newProgress(e, cmd, true)
	defer pr.done()
	out := &countingWriter{w: e.stdout, progress: pr}
	for attempt := 1; ; attempt++ {
		err := exportOnce(ctx, e, cmd, a, sf, *format, *key, out)
		if !errors.Is(err, conversation.ErrChanged) || out.n > 0 || attempt == exportAttempts {
			return err
		}
	}
}

// exportOnce reads the session and writes it to out.
func exportOnce(ctx context.Context, e *env, cmd string, a *sessionArg, sf slotFlags, format, key string, out io.Writer) error {
	s, _, f, err := a.read(ctx, e)
	if err != nil {
		return err
	}
	where := a.where(s.SessionID)
	plugins, closePlugins, err := historyPlugins(ctx, e, cmd, f, s, sf)
	if err != nil {
		return err
	}
	defer closePlugins()
	if format == formatOpenAI {
		return exportOpenAI(ctx, cmd, where, s, plugins, key, out)
	}
	got, err := conversation.Export(ctx, s, plugins, out)
	switch {
	case err == nil:
		if got.Revision != s.Revision {
			fmt.Fprintf(e.stderr, "wasmhist %s: exported revision %d, which its database holds: %s is at revision %d (a chat ended before saving it); the next chat brings it up to date\n",
				cmd, got.Revision, where, s.Revision)
		}
		return nil
	case interrupted(ctx, err):
		return failf(cmd, "%w while %s was exported: what was printed is incomplete", errInterrupted, where)
	case errors.Is(err, conversation.ErrChanged):
		return failf(cmd, "exporting %s: %w: a chat is committing to it; export again when it is idle", where, err)
	case errors.Is(err, conversation.ErrBehind):
		return failf(cmd, "exporting %s: %w; nothing was exported", where, err) // the advice is err's
	}
	return failf(cmd, "exporting %s: %w: what was printed is incomplete; check the session with 'wasmhist session validate'", where, err)
}

// historyPlugins loads the plugin of every slot of s, as session show
// does, granted the database the session records (or --db), and checks
// that each can read its slot: the database exists, the plugin can list.
func historyPlugins(ctx context.Context, e *env, cmd string, f sessionFile, s *session.Session, sf slotFlags) (map[string]*host.Plugin, func(), error) {
	if len(s.State) == 0 {
		return map[string]*host.Plugin{}, func() {}, nil
	}
	sp, err := loadSlotPlugins(ctx, e, cmd, f, s, *sf.plugin, *sf.db, sf.ps)
	if err != nil {
		return nil, nil, err
	}
	plugins := map[string]*host.Plugin{}
	for _, k := range slotKeys(s) {
		p, why := sp.plugin(s, k)
		if p == nil {
			sp.close(ctx)
			return nil, nil, failf(cmd, "slot %q of %s cannot be read: %s", k, f.path, why)
		}
		if err := sp.checkDB(p); err != nil {
			sp.close(ctx)
			return nil, nil, failf(cmd, "slot %q of %s: %w", k, f.path, err)
		}
		if !slices.Contains(p.Exports(), abi.ExportList) {
			sp.close(ctx)
			return nil, nil, failf(cmd, "slot %q of %s: plugin %s has no list export, so its history cannot be read from outside an agent run: use a plugin that implements sdk.Lister", k, f.path, p.Info().Name)
		}
		plugins[k] = p
	}
	return plugins, func() { sp.close(ctx) }, nil
}

// exportOpenAI writes the history of one slot as a Chat Completions
// messages array, read in one read transaction.
func exportOpenAI(ctx context.Context, cmd, where string, s *session.Session, plugins map[string]*host.Plugin, key string, out io.Writer) error {
	keys := slotKeys(s)
	switch {
	case key == "" && len(keys) == 1:
		key = keys[0]
	case key == "" && len(keys) == 0:
		return failf(cmd, "%s has no history: nothing to export", where)
	case key == "":
		return usagef(cmd, "%s has slots %s: pass --state-key with the one to export", where, describeSlots(s))
	case plugins[key] == nil:
		return usagef(cmd, "%s has no slot %q (it has %s): pass --state-key with one of them", where, key, describeSlots(s))
	}
	p := plugins[key]
	if err := conversation.CheckHeld(ctx, s, map[string]*host.Plugin{key: p}); err != nil {
		return failf(cmd, "exporting %s: %w; nothing was exported", where, err)
	}
	err := host.InRun(ctx, false, func(ctx context.Context) error {
		return portable.WriteOpenAI(out, func(yield func(abi.Message, error) bool) {
			for page, err := range p.Pages(ctx, s, key, historyPage) {
				if err != nil {
					yield(abi.Message{}, fmt.Errorf("listing slot %q through plugin %s: %w", key, p.Info().Name, err))
					return
				}
				for _, m := range page {
					if !yield(m, nil) {
						return
					}
				}
			}
		})
	})
	if err != nil {
		if errors.Is(err, portable.ErrConvert) {
			return failf(cmd, "exporting %s as Chat Completions messages: %w: export it as a wasmhist document instead", where, err)
		}
		return failf(cmd, "exporting %s as Chat Completions messages: %w: check the session with 'wasmhist session validate'", where, err)
	}
	return nil
}

// countingWriter counts what reached w.
// Past progressFrom bytes, it shows on progress how many were written.
type countingWriter struct {
	w        io.Writer
	n        int64
	progress *progress
}

// progressFrom is how much of an export is written before its progress
// is shown: a session's few pages go to disk in an instant, and a line
// flashed for them would be noise.
const progressFrom = 64 << 10

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	if c.n > progressFrom && c.progress != nil {
		c.progress.show("%.1f MiB written", float64(c.n)/(1<<20))
	}
	return n, err
}
