package provider

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strconv"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/sdk"
)

// stored is one selected message with its header columns.
type stored struct {
	seq            int64
	size           int  // the body's length in bytes, as stored
	system         bool // a system message
	calls, results []string
	body           json.RawMessage
}

// readWindow takes selectWindow's document apart: its headers, ordered by
// seq (the system message possibly twice), and the array of their bodies,
// which it slices by the stored lengths without scanning them. A body the
// host's compaction shortened (a message stored with white space, by an
// older plugin or another writer) moves every later boundary, so the
// slices are used only when they end exactly where the array does, the
// host's compaction only ever removing bytes; otherwise the array is split
// by scanning it. Duplicates are dropped once the bodies are assigned.
//
// The headers are read by hand: SQL wrote them, as integers and the
// stored id lists, and the host checked and compacted the document.
//
// expect is how many messages the window probably holds, to allocate once.
func readWindow(doc json.RawMessage, expect int) ([]stored, error) {
	if doc == nil {
		return nil, nil // no message
	}
	r := headerReader{doc: doc}
	r.want('[')
	r.want('[')
	w := make([]stored, 0, min(expect, 1024))
	for r.err == nil {
		var m stored
		r.want('[')
		m.seq = r.int()
		r.want(',')
		m.size = int(r.int())
		r.want(',')
		m.system = r.int() == 1
		r.want(',')
		m.calls = r.ids()
		r.want(',')
		m.results = r.ids()
		r.want(']')
		w = append(w, m)
		if r.err != nil || r.peek() != ',' {
			break
		}
		r.i++
	}
	r.want(']')
	r.want(',')
	if r.err != nil || len(doc) < r.i+2 || doc[len(doc)-1] != ']' {
		return nil, &abi.Error{Code: abi.CodeInternal, Message: "sqlite: window: malformed headers at byte " + strconv.Itoa(r.i)}
	}
	bodies := doc[r.i : len(doc)-1]
	if !slice(bodies, w) {
		if err := split(bodies, w); err != nil {
			return nil, &abi.Error{Code: abi.CodeInternal, Message: "sqlite: window: " + err.Error()}
		}
	}
	out := w[:0]
	for _, m := range w {
		if n := len(out); n > 0 && out[n-1].seq == m.seq {
			continue
		}
		out = append(out, m)
	}
	return out, nil
}

// headerReader reads the headers of selectWindow's document; the first
// unexpected byte sets err and stops it.
type headerReader struct {
	doc []byte
	i   int
	err error
}

func (r *headerReader) peek() byte {
	if r.err != nil || r.i >= len(r.doc) {
		return 0
	}
	return r.doc[r.i]
}

func (r *headerReader) want(c byte) {
	if r.peek() != c {
		r.fail()
		return
	}
	r.i++
}

func (r *headerReader) fail() {
	if r.err == nil {
		r.err = errMalformed
	}
}

var errMalformed = errors.New("malformed")

// int reads a non-negative integer.
func (r *headerReader) int() int64 {
	start := r.i
	var n int64
	for r.err == nil && r.i < len(r.doc) && r.doc[r.i] >= '0' && r.doc[r.i] <= '9' && r.i-start < 18 {
		n = n*10 + int64(r.doc[r.i]-'0')
		r.i++
	}
	if r.i == start {
		r.fail()
	}
	return n
}

// ids reads a list of call ids: null, or a JSON array of strings, read
// with the guest side's scanner.
func (r *headerReader) ids() []string {
	if r.peek() == 'n' {
		if !bytes.HasPrefix(r.doc[r.i:], []byte("null")) {
			r.fail()
		}
		r.i += 4
		return nil
	}
	if r.peek() != '[' {
		r.fail()
		return nil
	}
	d := sdk.NewJSONDecoder(r.doc[r.i:])
	var list []string
	err := d.Array(func() error {
		id, err := d.ReadString()
		list = append(list, id)
		return err
	})
	if err != nil {
		r.fail()
		return nil
	}
	r.i += d.Offset()
	return list
}

// slice assigns each message its body from the array bodies by the stored
// lengths, and reports whether they account for the array exactly.
func slice(bodies []byte, w []stored) bool {
	pos := 1
	for i := range w {
		end := pos + w[i].size
		if w[i].size <= 0 || end >= len(bodies) {
			return false
		}
		if sep := bodies[end]; sep != ',' && (sep != ']' || i != len(w)-1) {
			return false
		}
		w[i].body = bodies[pos:end:end]
		pos = end + 1
	}
	return len(bodies) > 0 && bodies[0] == '[' && pos == len(bodies)
}

// split assigns each message its body by scanning the array bodies.
func split(bodies []byte, w []stored) error {
	d := sdk.NewJSONDecoder(bodies)
	i := 0
	err := d.Array(func() error {
		v, err := d.ReadValue()
		if err == nil && i >= len(w) {
			err = d.Fail("more bodies than headers")
		}
		if err == nil {
			w[i].body = v
		}
		i++
		return err
	})
	if err == nil && i != len(w) {
		err = d.Fail("fewer bodies than headers")
	}
	return err
}

// trim bounds the window to max messages, keeping a leading system message,
// and drops tool results at its start whose calls fell outside it: a tool
// call is never returned without its results, nor results without their
// call.
func trim(w []stored, max int) []stored {
	var sys []stored
	if len(w) > 0 && w[0].system {
		sys, w = w[:1], w[1:]
		max--
	}
	if len(w) > max {
		w = w[len(w)-max:]
	}
	if len(w) == 0 || len(w[0].results) == 0 {
		return append(sys, w...) // nothing to drop
	}
	called := map[string]bool{}
	for _, m := range w {
		for _, id := range m.calls {
			called[id] = true
		}
	}
	for len(w) > 0 && len(w[0].results) > 0 && !slices.ContainsFunc(w[0].results, func(id string) bool { return called[id] }) {
		w = w[1:]
	}
	return append(sys, w...)
}
