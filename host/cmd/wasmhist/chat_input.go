package main

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"

	"golang.org/x/term"
)

// chatPrompt is the interactive chat's prompt.
const chatPrompt = "you> "

// line is one line of input, the end of input, Ctrl-C typed at the line
// editor, or a read error.
type line struct {
	text        string
	eof         bool
	interrupted bool
	err         error
}

// lineSource is where a chat's lines come from: standard input line by
// line, or at a terminal a line editor.
type lineSource interface {
	// next returns the channel the next line arrives on; waiting on it
	// can be abandoned (for a Ctrl-C that arrives as a signal).
	next() <-chan line
	// close gives the terminal back as it was.
	close()
}

// pipedLines reads r in the background, so that waiting for the next line
// can be interrupted. The goroutine ends with the input.
type pipedLines struct{ ch chan line }

func readLines(r io.Reader) *pipedLines {
	p := &pipedLines{ch: make(chan line)}
	go func() {
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), maxLineBytes)
		for sc.Scan() {
			p.ch <- line{text: sc.Text()}
		}
		if err := sc.Err(); err != nil {
			p.ch <- line{err: err}
		} else {
			p.ch <- line{eof: true}
		}
		close(p.ch)
	}()
	return p
}

func (p *pipedLines) next() <-chan line { return p.ch }
func (p *pipedLines) close()            {}

// lineEditor reads lines at a terminal through golang.org/x/term's line
// editor: arrows and the usual Emacs keys edit the line, up and down walk
// the history of earlier lines (kept in a file across runs). The terminal
// is in raw mode only while a line is read, so that during a turn Ctrl-C
// is a signal that cancels the turn. Reading runs in the background, one
// line per next, so that a signal can end the wait.
type lineEditor struct {
	fd    int         // the terminal's descriptor; -1: not a terminal (tests)
	saved *term.State // the terminal's state before the chat
	in    *ctrlCReader
	t     *term.Terminal
	ask   chan struct{}
	lines chan line
	// asked: a line was asked for; delivered: the editor has handed it
	// over (set just before the hand-over, which the caller waits for
	// before it asks again).
	asked     bool
	delivered atomic.Bool
}

// newLineEditor returns an editor reading keys from in and echoing to out.
// fd is in's terminal, put in raw mode while a line is read; -1 for none.
// hist keeps the earlier lines; nil keeps none past the run.
func newLineEditor(in io.Reader, out io.Writer, fd int, hist term.History) *lineEditor {
	ed := &lineEditor{fd: fd, in: &ctrlCReader{r: in}, ask: make(chan struct{}), lines: make(chan line)}
	if fd >= 0 {
		ed.saved, _ = term.GetState(fd)
	}
	ed.t = term.NewTerminal(struct {
		io.Reader
		io.Writer
	}{ed.in, out}, chatPrompt)
	if hist != nil {
		ed.t.History = hist
	}
	go ed.run()
	return ed
}

func (ed *lineEditor) run() {
	for range ed.ask {
		l := ed.readLine()
		ed.delivered.Store(true)
		ed.lines <- l
	}
}

func (ed *lineEditor) readLine() line {
	if ed.fd >= 0 {
		if w, h, err := term.GetSize(ed.fd); err == nil && w > 0 && h > 0 {
			ed.t.SetSize(w, h)
		}
		if st, err := term.MakeRaw(ed.fd); err == nil {
			defer term.Restore(ed.fd, st)
		}
	}
	s, err := ed.t.ReadLine()
	switch {
	case errors.Is(err, io.EOF) && ed.in.ctrlC():
		return line{interrupted: true}
	case errors.Is(err, io.EOF):
		return line{eof: true}
	case errors.Is(err, term.ErrPasteIndicator), err == nil:
		return line{text: s}
	}
	return line{err: err}
}

func (ed *lineEditor) next() <-chan line {
	if ed.asked && ed.delivered.Load() {
		ed.asked = false
		ed.delivered.Store(false)
	}
	if !ed.asked {
		ed.ask <- struct{}{}
		ed.asked = true
	}
	return ed.lines
}

// setPrompt changes the prompt of the lines asked for next: next hands
// the request to the editor's goroutine, after this returns.
func (ed *lineEditor) setPrompt(p string) { ed.t.SetPrompt(p) }

func (ed *lineEditor) close() {
	if ed.saved != nil {
		term.Restore(ed.fd, ed.saved)
	}
}

// ctrlCReader tells which key ended the input: x/term's editor ends its
// line with io.EOF for Ctrl-C as for Ctrl-D on an empty line, and the chat
// ends differently for each (status 130 for Ctrl-C, as for the signal). It
// hands the editor the keys read up to and including each Ctrl-C or
// Ctrl-D, so that the editor, which stops at such a key, stops at the last
// byte handed over.
type ctrlCReader struct {
	r       io.Reader
	buf     []byte
	pending []byte
	last    byte // the last byte handed over
}

func (c *ctrlCReader) Read(p []byte) (int, error) {
	if len(c.pending) == 0 {
		if c.buf == nil {
			c.buf = make([]byte, 256)
		}
		n, err := c.r.Read(c.buf)
		if n == 0 {
			return 0, err
		}
		c.pending = c.buf[:n]
	}
	end := len(c.pending)
	if i := bytes.IndexAny(c.pending, "\x03\x04"); i >= 0 {
		end = i + 1
	}
	n := copy(p, c.pending[:end])
	c.last = c.pending[n-1]
	c.pending = c.pending[n:]
	return n, nil
}

// ctrlC reports whether the last key handed over was Ctrl-C.
func (c *ctrlCReader) ctrlC() bool { return c.last == 3 }

// maxHistoryLines bounds the history of earlier lines, in memory and in
// its file.
const maxHistoryLines = 500

// historyFile is the history of earlier chat lines, kept in a file under
// the user's state directory (one line each, appended as they are typed).
// It implements term.History. A file that cannot be read or written keeps
// the history for this run only.
type historyFile struct {
	path    string
	entries []string // oldest first
}

// chatHistoryPath is $XDG_STATE_HOME/wasmhist/chat_history, or under
// ~/.local/state; "" when neither is set.
func chatHistoryPath(e *env) string {
	dir := e.getenv("XDG_STATE_HOME")
	if dir == "" {
		home := e.getenv("HOME")
		if home == "" {
			return ""
		}
		dir = filepath.Join(home, ".local", "state")
	}
	return filepath.Join(dir, "wasmhist", "chat_history")
}

// loadHistory reads the history in path ("" for none), keeping its last
// maxHistoryLines lines, and rewrites a file grown past twice that.
func loadHistory(path string) *historyFile {
	h := &historyFile{path: path}
	if path == "" {
		return h
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return h
	}
	for _, l := range strings.Split(string(b), "\n") {
		if l != "" {
			h.entries = append(h.entries, l)
		}
	}
	if len(h.entries) > maxHistoryLines {
		if len(h.entries) > 2*maxHistoryLines {
			kept := h.entries[len(h.entries)-maxHistoryLines:]
			os.WriteFile(path, []byte(strings.Join(kept, "\n")+"\n"), 0o600)
		}
		h.entries = h.entries[len(h.entries)-maxHistoryLines:]
	}
	return h
}

// Add keeps a line that is not blank and not the one before it.
func (h *historyFile) Add(entry string) {
	if strings.TrimSpace(entry) == "" || strings.ContainsAny(entry, "\r\n") {
		return
	}
	if n := len(h.entries); n > 0 && h.entries[n-1] == entry {
		return
	}
	h.entries = append(h.entries, entry)
	if len(h.entries) > maxHistoryLines {
		h.entries = h.entries[1:]
	}
	if h.path == "" {
		return
	}
	// Best effort: the history is a convenience, never a reason to stop.
	if err := os.MkdirAll(filepath.Dir(h.path), 0o700); err != nil {
		return
	}
	f, err := os.OpenFile(h.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	f.WriteString(entry + "\n")
	f.Close()
}

func (h *historyFile) Len() int { return len(h.entries) }

func (h *historyFile) At(i int) string { return h.entries[len(h.entries)-1-i] }

// chatLines is the line source of an interactive or piped chat.
func chatLines(e *env) lineSource {
	f, ok := e.stdin.(*os.File)
	if !ok || !isTerminal(e.stdin) {
		return readLines(e.stdin)
	}
	return newLineEditor(f, e.stdout, int(f.Fd()), loadHistory(chatHistoryPath(e)))
}
