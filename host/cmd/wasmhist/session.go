package main

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/wasmhist/wasmhist/host/session"
)

// sessionCommand is one subcommand of 'wasmhist session'.
type sessionCommand struct {
	name, args, summary string
	run                 func(ctx context.Context, e *env, args []string) error
}

func sessionCommands() []sessionCommand {
	return []sessionCommand{
		{"validate", "FILE", "check that FILE is a session its plugins can resume", runSessionValidate},
		{"list", "[DIR]", "list the session files in DIR (default .)", runSessionList},
		{"show", "FILE", "summarize a session: id, revision, each slot's plugin, state and messages", runSessionShow},
		{"delete", "FILE", "clear what the session's plugins stored, then remove FILE", runSessionDelete},
		{"export", "FILE", "print the session with its whole history as one portable document", runSessionExport},
		{"import", "FILE", "write the conversation read from standard input to FILE, all or nothing", runSessionImport},
		{"fork", "SOURCE NEW", "start NEW from the first turns of SOURCE, sharing nothing with it", runSessionFork},
		{"migrate", "", "copy every session of --from, with its history, into --to", runSessionMigrate},
		{"prune", "", "delete the sessions last committed before --older-than, with their data", runSessionPrune},
	}
}

func runSession(ctx context.Context, e *env, args []string) error {
	// The subcommand comes first, and its flags are its own: parse the
	// session command's flags (only --help) only when no subcommand leads.
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		for _, c := range sessionCommands() {
			if c.name == args[0] {
				return c.run(ctx, e, args[1:])
			}
		}
		name := args[0]
		if looksLikeConnString(name) {
			name = "(a connection string)"
		}
		return usagef("session", "unknown subcommand %q: use one of %s (see 'wasmhist session --help')", name, sessionCommandNames())
	}
	fs := flagSet(e, "session", helpText{
		usage:    "<subcommand> [flags] [arguments]",
		summary:  sessionHelp(),
		examples: []string{"wasmhist session list", "wasmhist session validate trip.json"},
	})
	pos, err := parse(fs, "session", args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return runSession(ctx, e, pos)
	}
	return usagef("session", "no subcommand: use one of %s, such as 'wasmhist session validate FILE' (see 'wasmhist session --help')", sessionCommandNames())
}

func sessionHelp() string {
	var b strings.Builder
	b.WriteString("Works with sessions, in files or, with --store, in a store.\n\nSubcommands:\n")
	for _, c := range sessionCommands() {
		fmt.Fprintf(&b, "  %-16s %s\n", c.name+" "+c.args, c.summary)
	}
	b.WriteString("\nRun 'wasmhist session <subcommand> --help' for a subcommand's flags.")
	return b.String()
}

func sessionCommandNames() string {
	var names []string
	for _, c := range sessionCommands() {
		names = append(names, c.name)
	}
	return strings.Join(names, ", ")
}

// onePath returns the single FILE argument of a session subcommand.
func onePath(cmd, what string, pos []string) (string, error) {
	if len(pos) != 1 {
		return "", usagef(cmd, "want exactly one %s, got %d arguments: use 'wasmhist %s %s'", what, len(pos), cmd, what)
	}
	return pos[0], nil
}

// slotKeys returns the session's state keys in order.
func slotKeys(s *session.Session) []string {
	keys := make([]string, 0, len(s.State))
	for k := range s.State {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// describeSlots is "history (inmemory, state version 1), ..." or "none".
func describeSlots(s *session.Session) string {
	var slots []string
	for _, k := range slotKeys(s) {
		st := s.State[k]
		slots = append(slots, fmt.Sprintf("%s (%s, state version %d)", k, st.Provider, st.StateVersion))
	}
	if len(slots) == 0 {
		return "none"
	}
	return strings.Join(slots, ", ")
}

// decodeSession is host.DecodeSession: it says where a document is wrong
// (a JSON pointer), which is what a person fixing a file needs.
func decodeSession(b []byte) (*session.Session, error) { return session.Decode(b) }
