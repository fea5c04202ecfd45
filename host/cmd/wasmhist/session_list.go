package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"
)

// sessionEntry is one session file in the output of 'session list'.
type sessionEntry struct {
	File             string      `json:"file"`
	SessionID        string      `json:"session_id"`
	Revision         int64       `json:"revision"`
	ServiceSessionID string      `json:"service_session_id,omitempty"`
	Slots            []slotEntry `json:"slots"`
	Modified         time.Time   `json:"modified"`
}

// slotEntry is one state slot of a listed session.
type slotEntry struct {
	Key          string `json:"key"`
	Plugin       string `json:"plugin"`
	StateVersion int    `json:"state_version"`
}

// skippedFile is a *.json file that is not a session.
type skippedFile struct {
	File   string `json:"file"`
	Reason string `json:"reason"`
}

// sessionListing is the --json output of 'session list'.
type sessionListing struct {
	Dir      string         `json:"dir"`
	Sessions []sessionEntry `json:"sessions"`
	Skipped  []skippedFile  `json:"skipped"`
}

// maxSessionBytes bounds a file 'session list' reads and 'session import'
// accepts: far beyond any session a chat writes.
const maxSessionBytes = 256 << 20

func runSessionList(ctx context.Context, e *env, args []string) error {
	const cmd = "session list"
	fs := flagSet(e, cmd, helpText{
		usage: "[DIR] [--store STORE] [--json]",
		summary: "Lists the sessions in DIR (default .): file, session id, revision, plugin per slot,\n" +
			"modification time; with --store, every session of the store.",
		examples: []string{"wasmhist session list", "wasmhist session list --store sessions.db --json"},
		details: "  *.json files in DIR that are not sessions are named on one line at the end;\n" +
			"  'wasmhist session validate FILE' says what is wrong with one.",
	})
	asJSON := fs.Bool("json", false, "print the list as one JSON object")
	store := storeFlags(fs)
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	if store.set() {
		if len(pos) > 0 {
			return usagef(cmd, "unexpected argument %q: with --store, 'wasmhist session list --store %s' lists the store", pos[0], store.raw)
		}
		return listStore(ctx, e, cmd, store, *asJSON)
	}
	if len(pos) > 1 {
		return usagef(cmd, "want at most one DIR, got %d arguments: use 'wasmhist session list [DIR]'", len(pos))
	}
	dir := "."
	if len(pos) == 1 {
		dir = pos[0]
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return failf(cmd, "reading directory %s: %w: check the path", dir, err)
	}
	l := sessionListing{Dir: dir, Sessions: []sessionEntry{}, Skipped: []skippedFile{}}
	for _, de := range ents {
		name := de.Name()
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		entry, reason := listEntry(filepath.Join(dir, name), de)
		if reason != "" {
			l.Skipped = append(l.Skipped, skippedFile{File: name, Reason: reason})
			continue
		}
		entry.File = name
		l.Sessions = append(l.Sessions, entry)
	}
	if *asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(l)
	}
	printSessionList(e.stdout, l)
	return nil
}

// listStore lists the sessions of a --store.
func listStore(ctx context.Context, e *env, cmd string, store *storeFlag, asJSON bool) error {
	st, err := store.open(ctx, e, cmd)
	if err != nil {
		return err
	}
	defer st.close()
	infos, err := st.List(ctx)
	if err != nil {
		return failf(cmd, "listing %s: %w: check the store", store.describe(), err)
	}
	l := sessionListing{Dir: store.describe(), Sessions: []sessionEntry{}, Skipped: []skippedFile{}}
	for _, info := range infos {
		s, err := st.Load(ctx, info.SessionID)
		if err != nil {
			l.Skipped = append(l.Skipped, skippedFile{File: info.SessionID, Reason: oneLine(err.Error())})
			continue
		}
		entry := sessionEntry{File: info.SessionID, SessionID: s.SessionID, Revision: s.Revision, ServiceSessionID: s.ServiceSessionID, Slots: []slotEntry{}, Modified: info.Updated}
		for _, k := range slotKeys(s) {
			entry.Slots = append(entry.Slots, slotEntry{Key: k, Plugin: s.State[k].Provider, StateVersion: s.State[k].StateVersion})
		}
		l.Sessions = append(l.Sessions, entry)
	}
	if asJSON {
		enc := json.NewEncoder(e.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(l)
	}
	printSessionList(e.stdout, l)
	return nil
}

// listEntry reads one *.json file, or says why it is not a session.
func listEntry(path string, de fs.DirEntry) (sessionEntry, string) {
	fi, err := de.Info()
	switch {
	case err != nil:
		return sessionEntry{}, "unreadable: " + err.Error()
	case fi.IsDir():
		return sessionEntry{}, "a directory"
	case !fi.Mode().IsRegular():
		return sessionEntry{}, "not a regular file"
	case fi.Size() > maxSessionBytes:
		return sessionEntry{}, "too large to be a session"
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return sessionEntry{}, "unreadable: " + err.Error()
	}
	s, err := decodeSession(b)
	if err != nil {
		return sessionEntry{}, "not a session"
	}
	entry := sessionEntry{SessionID: s.SessionID, Revision: s.Revision, ServiceSessionID: s.ServiceSessionID, Slots: []slotEntry{}, Modified: fi.ModTime()}
	for _, k := range slotKeys(s) {
		entry.Slots = append(entry.Slots, slotEntry{Key: k, Plugin: s.State[k].Provider, StateVersion: s.State[k].StateVersion})
	}
	return entry, ""
}

func printSessionList(w io.Writer, l sessionListing) {
	if len(l.Sessions) == 0 {
		fmt.Fprintf(w, "no sessions in %s\n", l.Dir)
	} else {
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "FILE\tSESSION\tREVISION\tPLUGINS\tMODIFIED")
		for _, s := range l.Sessions {
			var slots []string
			for _, sl := range s.Slots {
				slots = append(slots, sl.Key+"="+sl.Plugin)
			}
			plugins := strings.Join(slots, ",")
			if plugins == "" {
				plugins = "-"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\n", s.File, s.SessionID, s.Revision, plugins, s.Modified.Local().Format("2006-01-02 15:04:05"))
		}
		tw.Flush()
	}
	if len(l.Skipped) > 0 {
		var names []string
		for _, s := range l.Skipped {
			names = append(names, fmt.Sprintf("%s (%s)", s.File, s.Reason))
		}
		fmt.Fprintf(w, "skipped %d: %s\n", len(l.Skipped), oneLine(strings.Join(names, ", ")))
	}
}
