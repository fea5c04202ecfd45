package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/wasmhist/wasmhist/host/session"
)

func runSession(ctx context.Context, e *env, args []string) error {
	fs := flagSet(e, "session", "validate FILE",
		"Works with session files. 'validate' checks that FILE is a session this host can resume:\n"+
			"valid JSON matching the session schema (schemas/session.json), and says what is wrong and where.")
	pos, err := parse(fs, "session", args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("session", "no subcommand: use 'wasmhist session validate FILE'")
	}
	switch pos[0] {
	case "validate":
		return runSessionValidate(ctx, e, pos[1:])
	default:
		return usagef("session", "unknown subcommand %q: use 'wasmhist session validate FILE'", pos[0])
	}
}

func runSessionValidate(_ context.Context, e *env, args []string) error {
	const cmd = "session validate"
	fs := flagSet(e, cmd, "FILE",
		"Checks that FILE is a valid session: JSON matching schemas/session.json, at the schema version\n"+
			"this host writes. Prints OK and a summary, or one line saying what is wrong and where.")
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef(cmd, "want exactly one FILE, got %d arguments: use 'wasmhist session validate FILE'", len(pos))
	}
	path := pos[0]
	b, err := os.ReadFile(path)
	if err != nil {
		return failf(cmd, "reading %s: %w: check the path", path, err)
	}
	s, err := decodeSession(b)
	if err != nil {
		return failf(cmd, "%s is not a valid session: %w: fix the file at the place named, or start a new session", path, err)
	}
	keys := make([]string, 0, len(s.State))
	for k := range s.State {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	var slots []string
	for _, k := range keys {
		st := s.State[k]
		slots = append(slots, fmt.Sprintf("%s (%s, state version %d)", k, st.Provider, st.StateVersion))
	}
	if len(slots) == 0 {
		slots = append(slots, "none")
	}
	fmt.Fprintf(e.stdout, "OK: %s: session %s, schema version %d, revision %d, state slots: %s\n",
		path, s.SessionID, s.SchemaVersion, s.Revision, strings.Join(slots, ", "))
	return nil
}

// decodeSession is host.DecodeSession: it says where a document is wrong
// (a JSON pointer), which is what a person fixing a file needs.
func decodeSession(b []byte) (*session.Session, error) { return session.Decode(b) }
