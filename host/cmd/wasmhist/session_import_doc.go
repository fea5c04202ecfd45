package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"iter"
	"maps"
	"os"
	"slices"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/host/conversation"
	"github.com/wasmhist/wasmhist/host/portable"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/sqlgrant"
	"github.com/wasmhist/wasmhist/host/store"
)

// What standard input of session import holds.
const (
	inputDocument = "document" // a portable document
	inputSession  = "session"  // a session file as stored (export --raw)
	inputOpenAI   = "openai"   // a Chat Completions messages array
)

// sniffBytes is how much of standard input import looks at to tell a
// portable document from a session file: enough for the first member.
const sniffBytes = 64 << 10

func runSessionImport(ctx context.Context, e *env, args []string) error {
	const cmd = "session import"
	fs := flagSet(e, cmd, helpText{
		usage: "[FILE] [--as ID] [--format F] [--force] [flags] < DOCUMENT",
		summary: "Writes the conversation read from standard input into FILE or the store, all or nothing,\n" +
			"into a fresh state of each slot's plugin: the copy shares nothing with its original.",
		examples: []string{
			"wasmhist session export trip.json | wasmhist session import copy.json",
			"wasmhist session import --format openai from-openai.json < trip.openai.json",
		},
		details: "  Standard input holds a portable document ('wasmhist session export'), or with --format\n" +
			"  openai a Chat Completions messages array. The history goes into a fresh state of the\n" +
			"  plugin each slot names (or --plugin), granted --db (default: FILE with .db, or the\n" +
			"  store's). The session keeps its id unless --as gives another. A malformed document is\n" +
			"  refused saying where, with nothing written; an existing session is replaced only with\n" +
			"  --force. A session file as stored ('export --raw') is written as it is, replacing only\n" +
			"  an older revision, once its plugins read its state as 'session validate' does.",
	})
	force := fs.Bool("force", false, "replace an existing session of the same id, clearing its history")
	st := storeFlags(fs)
	as := fs.String("as", "", "import the session under the new `ID`")
	pluginSpec := fs.String("plugin", "", "plugin that takes the history: inmemory, sqlite or `PATH.wasm`")
	dbPath := fs.String("db", "", "database for a sql plugin: SQLite `PATH`, postgres or env:VAR (default FILE.db)")
	format := fs.String("format", "", "what standard input holds: wasmhist or openai (default: recognised)")
	ps := pluginFlags(fs)
	pos, err := parse(fs, cmd, args)
	if err != nil {
		return err
	}
	if *format != "" && *format != formatWasmhist && *format != formatOpenAI {
		return usagef(cmd, "--format %q: use wasmhist or openai", *format)
	}
	in := bufio.NewReaderSize(e.stdin, sniffBytes)
	kind, err := sniffImport(in)
	if err != nil {
		return failf(cmd, "reading standard input: %w", err)
	}
	switch {
	case kind == "":
		return usagef(cmd, "nothing on standard input: use 'wasmhist session export OLD.json | wasmhist session import NEW.json'")
	case *format == formatOpenAI && kind != inputOpenAI:
		return failf(cmd, "standard input is not a Chat Completions messages array (it starts with an object): drop --format openai to import a wasmhist document")
	case *format == formatWasmhist && kind == inputOpenAI:
		return failf(cmd, "standard input is a JSON array, not a wasmhist document: pass --format openai to import a Chat Completions messages array")
	case kind == inputSession:
		if *as != "" || *pluginSpec != "" || *dbPath != "" {
			return usagef(cmd, "standard input is a session file as stored (export --raw), which keeps its own id, plugin state and database: drop --as, --plugin and --db, or import a portable document ('wasmhist session export' without --raw)")
		}
		raw := *e
		raw.stdin = in
		return importRaw(ctx, &raw, cmd, st, pos, force, ps)
	}
	imp := &docImport{cmd: cmd, e: e, in: in, store: st, as: *as, plugin: *pluginSpec, db: *dbPath, force: *force, ps: ps}
	if err := imp.target(pos); err != nil {
		return err
	}
	defer imp.close(ctx)
	if kind == inputOpenAI {
		return imp.runOpenAI(ctx)
	}
	return imp.runDocument(ctx)
}

// sniffImport tells what standard input holds from its first member; ""
// when it is empty.
func sniffImport(in *bufio.Reader) (string, error) {
	head, err := in.Peek(sniffBytes)
	if err != nil && len(head) == 0 && !errors.Is(err, bufio.ErrBufferFull) && !errors.Is(err, io.EOF) {
		return "", err
	}
	head = bytes.TrimLeft(head, " \t\r\n")
	switch {
	case len(head) == 0:
		return "", nil
	case head[0] == '[':
		return inputOpenAI, nil
	}
	dec := json.NewDecoder(bytes.NewReader(head))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return inputDocument, nil // the Reader says what is wrong
	}
	if tok, err := dec.Token(); err == nil && tok == "schema_version" {
		return inputSession, nil
	}
	return inputDocument, nil
}

// docImport is one import of a portable document or a messages array.
type docImport struct {
	cmd    string
	e      *env
	in     *bufio.Reader
	store  *storeFlag
	as     string
	plugin string
	db     string
	force  bool
	ps     *pluginSettings

	file *sessionFile // the target FILE; nil with --store
	sa   *sessionArg  // the target store; nil for a FILE
	h    *host.Host
}

// target checks FILE or --store, before standard input is read further.
func (d *docImport) target(pos []string) error {
	if d.store.set() {
		if len(pos) > 0 {
			return usagef(d.cmd, "unexpected argument %q: with --store the session goes into the store under its id (or --as): use 'wasmhist session import --store %s [--as NEW_ID] < DOCUMENT'", pos[0], d.store.raw)
		}
		d.sa = &sessionArg{cmd: d.cmd, store: d.store}
		return nil
	}
	path, err := onePath(d.cmd, "FILE", pos)
	if err != nil {
		return err
	}
	f, err := parseSessionFile(d.cmd, path)
	if err != nil {
		return err
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return failf(d.cmd, "%s is a directory: name the session file to write", path)
	}
	d.file = &f
	return nil
}

func (d *docImport) close(ctx context.Context) {
	if d.h != nil {
		d.h.Close(context.WithoutCancel(ctx))
	}
	if d.sa != nil {
		d.sa.close()
	}
}

// where names the target.
func (d *docImport) where(id string) string {
	if d.file != nil {
		return d.file.path
	}
	return fmt.Sprintf("session %s in %s", id, d.store.describe())
}

// place names the target store: FILE, or the --store.
func (d *docImport) place() string {
	if d.file != nil {
		return d.file.path
	}
	return d.store.describe()
}

// saver opens the target store for session id and returns it with the
// database a plugin that wants sql gets by default.
func (d *docImport) saver(ctx context.Context, id string) (store.Saver, string, error) {
	if d.file != nil {
		s, err := d.file.store(d.cmd)
		return s, d.file.dbPath(), err
	}
	d.sa.name = id
	if err := d.sa.openStore(ctx, d.e); err != nil {
		return nil, "", err
	}
	return d.sa.st, d.store.defaultDB(id), nil
}

// plugins loads the target plugin of each slot (by state key, the plugin
// name the slot records), granted the target database.
func (d *docImport) plugins(ctx context.Context, names map[string]string, defaultDB string) (map[string]*host.Plugin, string, error) {
	db := d.db
	if db == "" {
		db = defaultDB
	}
	grants := []host.Grant{sqlgrant.New(sqlgrant.Config{PathFunc: func(context.Context) (string, error) {
		return "", errors.New("no database given")
	}})}
	if db != "" {
		var err error
		if grants, err = dbGrantsFor(d.e, d.cmd, db); err != nil {
			return nil, "", err
		}
	}
	h, err := newHost(ctx, d.e, d.cmd, d.ps)
	if err != nil {
		return nil, "", err
	}
	d.h = h
	bySpec := map[string]*host.Plugin{}
	out := map[string]*host.Plugin{}
	usesDB := false
	for _, key := range slices.Sorted(maps.Keys(names)) {
		spec := d.plugin
		if spec == "" {
			if spec, err = pluginOfSession(d.cmd, "standard input", names[key]); err != nil {
				return nil, "", err
			}
		}
		p := bySpec[spec]
		if p == nil {
			path, err := resolvePlugin(d.e, d.cmd, spec)
			if err != nil {
				return nil, "", err
			}
			if p, err = loadPlugin(ctx, d.e, h, d.cmd, path, grants, d.ps); err != nil {
				return nil, "", err
			}
			bySpec[spec] = p
		}
		usesDB = usesDB || wantsSQL(p)
		out[key] = p
	}
	switch {
	case usesDB && db == "":
		return nil, "", usagef(d.cmd, "the history goes into a plugin that keeps it in a database, and --store %s names none: %s", d.store.raw, needDB(nil))
	case !usesDB && d.db != "":
		return nil, "", usagef(d.cmd, "--db %s: no plugin of the import keeps history in a database, so it would not be used: drop --db, or pass --plugin sqlite", d.db)
	case usesDB:
		if err := checkDatabase(d.cmd, db); err != nil {
			return nil, "", err
		}
		return out, db, nil
	}
	return out, "", nil
}

// unread is the failure to read standard input with err: an interrupt,
// or what the document got wrong, as format says.
func (d *docImport) unread(ctx context.Context, err error, format string) error {
	if interrupted(ctx, err) {
		return failf(d.cmd, "%w while standard input was read: nothing was imported", errInterrupted)
	}
	return failf(d.cmd, format, err)
}

// runDocument imports a portable document.
func (d *docImport) runDocument(ctx context.Context) error {
	r, err := portable.NewReaderContext(ctx, d.in, portable.Limits{})
	if err != nil {
		return d.unread(ctx, err, "standard input is not a portable session document: %w; nothing was imported")
	}
	fields := r.Session()
	if d.as != "" {
		fields.SessionID = d.as
	}
	next, stop := iter.Pull2(r.Slots())
	defer stop()
	first, err, more := next()
	if err != nil {
		return d.unread(ctx, err, "standard input: %w; nothing was imported")
	}
	// The slots come one at a time; the session's provenance names them
	// all in advance (a document of one slot needs none).
	names := map[string]string{}
	for k, pr := range fields.Provenance {
		names[k] = pr.Plugin
	}
	if more {
		if _, ok := names[first.Key]; !ok && len(names) > 0 {
			return failf(d.cmd, "standard input: slot %q is not named by the session's provenance (%s): the document was changed after export; nothing was imported", first.Key, strings.Join(slices.Sorted(maps.Keys(names)), ", "))
		}
		names[first.Key] = first.Plugin
	} else {
		clear(names)
	}
	// The slots are imported as the document holds them, in any order:
	// each is written while it is read, so the memory held stays one
	// message whatever the history's length.
	messages := 0
	sl, err, ok := first, error(nil), more
	seen := map[string]bool{}
	// check says what is wrong with the slot read ahead (sl), or with the
	// end of the document when there is none.
	check := func() error {
		if err != nil {
			return err
		}
		if ok {
			if _, named := names[sl.Key]; !named {
				return fmt.Errorf("%w: slot %q, which the session's provenance does not name", portable.ErrMalformed, sl.Key)
			}
			return nil
		}
		for _, key := range slices.Sorted(maps.Keys(names)) {
			if !seen[key] {
				return fmt.Errorf("%w: the document ends without slot %q, which the session's provenance names", portable.ErrTruncated, key)
			}
		}
		return nil
	}
	slots := func(yield func(conversation.SlotHistory, error) bool) {
		if err := check(); err != nil {
			yield(conversation.SlotHistory{}, err)
			return
		}
		for ok {
			cur := sl
			seen[cur.Key] = true
			history := func(yield func(abi.Message, error) bool) {
				for m, err := range cur.Messages() {
					if err == nil {
						messages++
					}
					if !yield(m, err) || err != nil {
						return
					}
				}
				// Read on to the next slot, or to the end of the
				// document and its totals, before the plugin stores
				// this slot's last page: a document that fails there
				// writes nothing, not even a database file.
				sl, err, ok = next()
				if err := check(); err != nil {
					yield(abi.Message{}, err)
				}
			}
			if !yield(conversation.SlotHistory{Key: cur.Key, History: history}, nil) || sl == cur {
				return // the import stopped before the slot's end
			}
		}
	}
	return d.commit(ctx, fields, names, slots, &messages)
}

// runOpenAI imports a Chat Completions messages array as the history
// slot of a new session.
func (d *docImport) runOpenAI(ctx context.Context) error {
	id := d.as
	if id == "" && d.file != nil {
		id = d.file.name
	}
	if id == "" {
		return usagef(d.cmd, "a messages array names no session: pass --as ID")
	}
	name := d.plugin
	if name == "" {
		name = "inmemory"
	}
	messages := 0
	history := func(yield func(abi.Message, error) bool) {
		for m, err := range portable.ReadOpenAIContext(ctx, d.in, portable.Limits{}) {
			if err == nil {
				messages++
			}
			if !yield(m, err) || err != nil {
				return
			}
		}
	}
	return d.commit(ctx, &session.Session{SessionID: id}, map[string]string{stateKey: name},
		func(yield func(conversation.SlotHistory, error) bool) {
			yield(conversation.SlotHistory{Key: stateKey, History: history}, nil)
		}, &messages)
}

// commit runs conversation.ImportSlots into the target and reports it,
// with the number of messages the slots' histories counted in *messages.
func (d *docImport) commit(ctx context.Context, fields *session.Session, names map[string]string, slots iter.Seq2[conversation.SlotHistory, error], messages *int) error {
	id := fields.SessionID
	where := d.where(id)
	saver, defaultDB, err := d.saver(ctx, id)
	if err != nil {
		return err
	}
	replaced, err := d.replaceCorrupt(ctx, id)
	if err != nil {
		return err
	}
	plugins, db, err := d.plugins(ctx, names, defaultDB)
	if err != nil {
		return err
	}
	s, err := conversation.ImportSlots(ctx, fields, slots, conversation.Target{Store: saver, Plugins: plugins, Log: warnLogger(d.e.stderr, d.cmd)},
		&conversation.ImportOptions{Force: d.force})
	var pe *portable.Error
	switch {
	case err == nil:
	case interrupted(ctx, err):
		return failf(d.cmd, "%w while %s was imported: nothing was imported", errInterrupted, where)
	case errors.Is(err, conversation.ErrSessionExists):
		return &quietError{msg: fmt.Sprintf("wasmhist %s: %s already holds session %s: pass --force to replace it, or import under another id with --as", d.cmd, d.place(), id), err: err}
	case errors.As(err, &pe):
		return failf(d.cmd, "standard input: %w; nothing was imported", pe)
	case errors.Is(err, conversation.ErrHistoryRefused):
		return failf(d.cmd, "importing into %s: %w", where, err)
	default:
		return failf(d.cmd, "importing into %s: %w: nothing was imported", where, err)
	}
	line := fmt.Sprintf("imported session %s (revision %d, %d messages, state slots: %s) into %s", s.SessionID, s.Revision, *messages, describeSlots(s), where)
	if db != "" {
		line += ", database " + db
	}
	fmt.Fprintln(d.e.stdout, line+replaced)
	return nil
}

// replaceCorrupt removes, with --force, a stored session of id that is
// corrupt (nothing can be read of it, so nothing is lost), as a raw
// import does; without --force it is refused with the advice for it. It
// returns what to add to the report.
func (d *docImport) replaceCorrupt(ctx context.Context, id string) (string, error) {
	if d.sa == nil {
		return "", nil
	}
	_, _, err := d.sa.loadStored(ctx, d.e, id)
	switch {
	case !d.sa.corrupt(err):
		return "", nil
	case !d.force:
		return "", failf(d.cmd, "%w: %s", err, d.sa.loadAdvice(err, ""))
	}
	if err := d.sa.removeCorrupt(ctx, d.e); err != nil {
		return "", err
	}
	return fmt.Sprintf(", replacing the corrupt stored one (%s)", oneLine(err.Error())), nil
}
