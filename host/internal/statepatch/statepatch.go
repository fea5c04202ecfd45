package statepatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/bulk"
	"github.com/wasmhist/wasmhist/host/internal/schema"
)

var (
	// ErrPatch is wrapped by every error about a patch that cannot be
	// applied: an unknown operation, a bad pointer, a missing target, a
	// value that is not JSON. A patch whose result violates the state schema
	// is reported with schema.ErrInvalid instead.
	ErrPatch = errors.New("statepatch: patch does not apply")
	// ErrPointer is wrapped by errors about malformed JSON Pointers.
	ErrPointer = errors.New("statepatch: invalid JSON pointer")
	// ErrDocument is wrapped by errors about a document that is not valid
	// JSON, or has an object with a duplicate member on a patched path.
	ErrDocument = errors.New("statepatch: invalid document")
	// ErrNotFound is wrapped, besides ErrPatch, by errors about a pointer
	// naming an object member that does not exist.
	ErrNotFound = errors.New("not found")
)

// node is the span of one value, relative to its parent's start, and for an
// indexed container the spans of its children.
type node struct {
	key     string // object members: the member name
	koff    int    // start of the member (its key; for array elements, the value)
	off     int    // start of the value
	size    int
	kind    byte // '{', '[' or 0 for scalars
	indexed bool
	kids    []node
	keys    map[string]int // large objects: name -> index in kids; nil until needed
}

// largeObject is the member count from which lookups go through a map.
const largeObject = 16

// Doc is a JSON document with an index of value spans; see the package
// documentation. A Doc is not safe for concurrent use.
type Doc struct {
	buf     []byte
	root    node // root.off is the absolute offset of the root value
	logging bool
	undo    []undoRec
	// edits counts the splices of buf: a Doc whose count is what it was
	// when its document was found equal to some bytes still holds them
	// (Cache.Claim).
	edits uint64
}

type undoRec struct {
	a, n int // the splice wrote n bytes at a
	old  []byte
}

// Parse checks that raw is one JSON value and returns a Doc of a copy of it.
func Parse(raw []byte) (*Doc, error) {
	if !json.Valid(raw) {
		var v any
		err := json.Unmarshal(raw, &v)
		if err == nil {
			err = errors.New("not a JSON value")
		}
		return nil, fmt.Errorf("%w: %w", ErrDocument, err)
	}
	// Spare room so the first appends need no reallocation.
	buf := make([]byte, len(raw), len(raw)+len(raw)/4+512)
	bulk.Copy(buf, raw)
	d := &Doc{buf: buf}
	d.resetRoot()
	return d, nil
}

func (d *Doc) resetRoot() {
	start, end := skipWS(d.buf, 0), len(d.buf)
	for end > start && isWS(d.buf[end-1]) {
		end--
	}
	d.root = node{off: start, size: end - start, kind: kindOf(d.buf[start])}
}

// Bytes returns a copy of the document, the caller's to keep. A Doc never
// hands out its buffer, which it edits in place: a state returned here
// stays as it is whatever the Doc does next.
func (d *Doc) Bytes() json.RawMessage { return bulk.Clone(d.buf) }

// Equal reports whether raw is the document, byte for byte.
func (d *Doc) Equal(raw []byte) bool { return bulk.Equal(d.buf, raw) }

// Len is the document's length in bytes.
func (d *Doc) Len() int { return len(d.buf) }

// Clone returns an independent copy with the same index state discarded.
func (d *Doc) Clone() *Doc {
	// Offsets in the index are relative, so the copy's index is the same
	// tree: copying it spares the copy a re-scan of the document.
	buf := make([]byte, len(d.buf), cap(d.buf))
	bulk.Copy(buf, d.buf)
	return &Doc{buf: buf, root: d.root.clone()}
}

// clone deep-copies an index node.
func (n node) clone() node {
	if n.kids != nil {
		kids := make([]node, len(n.kids))
		for i := range n.kids {
			kids[i] = n.kids[i].clone()
		}
		n.kids = kids
	}
	if n.keys != nil {
		keys := make(map[string]int, len(n.keys))
		for k, v := range n.keys {
			keys[k] = v
		}
		n.keys = keys
	}
	return n
}

// Get returns the value at a JSON Pointer, valid until the next Apply.
func (d *Doc) Get(pointer string) (json.RawMessage, error) {
	tokens, err := ParsePointer(pointer)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPatch, err)
	}
	frames, err := d.walk(tokens)
	if err != nil {
		return nil, err
	}
	f := frames[len(frames)-1]
	return d.buf[f.abs : f.abs+f.n.size : f.abs+f.n.size], nil
}

// Elements returns the elements of the array at a JSON Pointer without
// decoding them (none for null). The slices are valid until the next Apply.
func (d *Doc) Elements(pointer string) ([]json.RawMessage, error) {
	out, _, err := d.ElementRange(pointer, 0, -1)
	return out, err
}

// ElementRange returns the elements from index from up to, not including,
// index to (to < 0: up to the end) of the array at a JSON Pointer, and the
// array's length; none and 0 for null. Indexes past the end are clamped, so
// a range at or past the end is empty. Once the array is indexed (the last
// patch or lookup did that), the cost is that of the range, not of the
// array. The slices are valid until the next Apply.
func (d *Doc) ElementRange(pointer string, from, to int) ([]json.RawMessage, int, error) {
	tokens, err := ParsePointer(pointer)
	if err != nil {
		return nil, 0, fmt.Errorf("%w: %w", ErrPatch, err)
	}
	frames, err := d.walk(tokens)
	if err != nil {
		return nil, 0, err
	}
	f := frames[len(frames)-1]
	if f.n.kind == 0 && string(d.buf[f.abs:f.abs+f.n.size]) == "null" {
		return nil, 0, nil
	}
	if f.n.kind != '[' {
		return nil, 0, fmt.Errorf("%w: %s is not an array", ErrPatch, quotePointer(pointer))
	}
	if err := d.index(f.n, f.abs); err != nil {
		return nil, 0, err
	}
	n := len(f.n.kids)
	if to < 0 || to > n {
		to = n
	}
	from = min(max(from, 0), to)
	out := make([]json.RawMessage, to-from)
	for i, k := range f.n.kids[from:to] {
		a := f.abs + k.off
		out[i] = d.buf[a : a+k.size : a+k.size]
	}
	return out, n, nil
}

// Apply applies ops in order, checking each new value against s (if s is
// not nil) as the package documentation describes. On error the Doc is
// unchanged.
func (d *Doc) Apply(ops []abi.PatchOp, s *schema.Schema) error {
	return d.ApplyContext(context.Background(), ops, s)
}

// ApplyContext is Apply, bounded by ctx: when ctx ends among the
// operations (each may move the whole document), it returns ctx's error
// at once and leaves the Doc half patched (undoing would take as long
// again): drop it.
func (d *Doc) ApplyContext(ctx context.Context, ops []abi.PatchOp, s *schema.Schema) error {
	d.logging, d.undo = true, d.undo[:0]
	defer func() {
		d.logging = false
		clear(d.undo)
		d.undo = d.undo[:0]
	}()
	full := false
	for i, op := range ops {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("statepatch: op %d of %d: %w", i, len(ops), err)
		}
		needFull, err := d.apply(ctx, op, s)
		if err != nil && ctx.Err() != nil {
			// Stopped in the validation of the operation's value.
			return fmt.Errorf("statepatch: op %d of %d: %w", i, len(ops), err)
		}
		if err != nil {
			d.rollback()
			return fmt.Errorf("statepatch: op %d (%s %s): %w", i, op.Op, quotePointer(op.Path), err)
		}
		full = full || needFull
	}
	if full && s != nil {
		if err := s.ValidateContext(ctx, d.buf); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("statepatch: patched state: %w", err)
			}
			d.rollback()
			return fmt.Errorf("statepatch: patched state: %w", err)
		}
	}
	return nil
}

func (d *Doc) rollback() {
	if len(d.undo) == 0 {
		return
	}
	d.logging = false
	for i := len(d.undo) - 1; i >= 0; i-- {
		u := d.undo[i]
		d.splice(u.a, u.a+u.n, u.old)
	}
	// Rebuilding the index lazily is simpler than undoing its updates, and
	// a failed patch is the rare path.
	d.resetRoot()
}

// frame is one level of a resolved path: the node, its absolute start, and
// which child the path takes from it.
type frame struct {
	n   *node
	abs int
	idx int
}

// walk resolves tokens from the root; it returns one frame per level, the
// last being the target.
func (d *Doc) walk(tokens []string) ([]frame, error) {
	frames := make([]frame, 1, len(tokens)+1)
	frames[0] = frame{n: &d.root, abs: d.root.off}
	for j, t := range tokens {
		f := &frames[j]
		if f.n.kind == 0 {
			return nil, fmt.Errorf("%w: %s is not an object or array", ErrPatch, quotePointer(FormatPointer(tokens[:j])))
		}
		if err := d.index(f.n, f.abs); err != nil {
			return nil, err
		}
		var i int
		if f.n.kind == '{' {
			if i = lookup(f.n, t); i < 0 {
				return nil, fmt.Errorf("%w: %s %w", ErrPatch, quotePointer(FormatPointer(tokens[:j+1])), ErrNotFound)
			}
		} else {
			var err error
			if i, err = arrayIndex(t, len(f.n.kids), false); err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrPatch, quotePointer(FormatPointer(tokens[:j+1])), err)
			}
		}
		f.idx = i
		k := &f.n.kids[i]
		frames = append(frames, frame{n: k, abs: f.abs + k.off})
	}
	return frames, nil
}

var (
	comma = []byte{','}
	colon = []byte{':'}
)

// apply runs one operation; it reports whether the operation could not be
// checked locally, so the whole document must be validated.
var errNotJSON = fmt.Errorf("%w: value is not valid JSON", ErrPatch)

func (d *Doc) apply(ctx context.Context, op abi.PatchOp, s *schema.Schema) (full bool, err error) {
	var v []byte
	switch op.Op {
	case abi.PatchAdd, abi.PatchReplace:
		v = trimWS(op.Value)
		if len(v) == 0 {
			return false, fmt.Errorf("%w: %s needs a value", ErrPatch, op.Op)
		}
		// Whether v is JSON is checked below, once: by the schema's
		// decoding of it when a local check decodes it, else by json.Valid.
	case abi.PatchRemove:
	default:
		return false, fmt.Errorf("%w: unknown op %q (want add, replace or remove)", ErrPatch, op.Op)
	}
	tokens, err := ParsePointer(op.Path)
	if err != nil {
		return false, fmt.Errorf("%w: %w", ErrPatch, err)
	}
	if len(tokens) == 0 {
		if op.Op == abi.PatchRemove {
			return false, fmt.Errorf("%w: cannot remove the whole document", ErrPatch)
		}
		if !json.Valid(v) {
			return false, errNotJSON
		}
		d.splice(d.root.off, d.root.off+d.root.size, v)
		d.resetRoot()
		return s != nil, nil
	}
	last := len(tokens) - 1
	frames, err := d.walk(tokens[:last])
	if err != nil {
		return false, err
	}
	cf := frames[len(frames)-1]
	c := cf.n
	if c.kind == 0 {
		return false, fmt.Errorf("%w: %s is not an object or array", ErrPatch, quotePointer(FormatPointer(tokens[:last])))
	}
	if err := d.index(c, cf.abs); err != nil {
		return false, err
	}
	t := tokens[last]

	edit := schema.Edit{ContainerArray: c.kind == '[', Key: t}
	if s != nil {
		edit.Path = make([]schema.Step, last)
		for j := range last {
			edit.Path[j] = schema.Step{Token: tokens[j], Array: frames[j].n.kind == '['}
		}
	}
	idx := -1
	if c.kind == '{' {
		idx = lookup(c, t)
		switch {
		case op.Op == abi.PatchAdd && idx < 0:
			edit.Kind = schema.Insert
		case idx < 0:
			return false, fmt.Errorf("%w: %s not found", ErrPatch, quotePointer(op.Path))
		case op.Op == abi.PatchRemove:
			edit.Kind = schema.Remove
		default:
			edit.Kind = schema.Replace
		}
	} else {
		n := len(c.kids)
		if t == "-" {
			if op.Op != abi.PatchAdd {
				return false, fmt.Errorf("%w: \"-\" (past the last element) can only be added to", ErrPatch)
			}
			idx = n
		} else if idx, err = arrayIndex(t, n, op.Op == abi.PatchAdd); err != nil {
			return false, fmt.Errorf("%w: %v", ErrPatch, err)
		}
		switch op.Op {
		case abi.PatchAdd:
			edit.Kind = schema.Insert
		case abi.PatchRemove:
			edit.Kind = schema.Remove
		default:
			edit.Kind = schema.Replace
		}
		edit.Key = strconv.Itoa(idx)
	}
	checked := false // v is known to be JSON
	if s != nil {
		l, ok := s.Local(edit)
		if !ok {
			full = true
		} else if edit.Kind != schema.Remove && l.Decodes() {
			val, err := schema.DecodeUntrusted(v, "")
			if err != nil {
				return false, errNotJSON
			}
			checked = true
			at := FormatPointer(tokens[:last]) + "/" + escapeToken(edit.Key)
			if err := l.ValidateDecodedContext(ctx, val, at); err != nil {
				return false, err
			}
		}
	}
	if v != nil && !checked && !json.Valid(v) {
		return false, errNotJSON
	}

	// The edit itself cannot fail from here on.
	var delta int
	switch {
	case c.kind == '{' && edit.Kind == schema.Insert:
		delta = d.insertMember(cf, t, v)
	case c.kind == '[' && edit.Kind == schema.Insert:
		delta = d.insertElement(cf, idx, v)
	case edit.Kind == schema.Replace:
		delta = d.replaceChild(cf, idx, v)
	default:
		delta = d.removeChild(cf, idx)
	}
	for _, f := range frames[:len(frames)-1] {
		f.n.size += delta
		shiftKids(f.n.kids[f.idx+1:], delta)
	}
	return full, nil
}

func (d *Doc) insertMember(cf frame, key string, v []byte) int {
	c := cf.n
	kj := quoteKey(key)
	var k node
	var delta int
	if len(c.kids) == 0 {
		pos := cf.abs + c.size - 1 // the closing brace
		d.splice(pos, pos, kj, colon, v)
		k.koff = pos - cf.abs
		delta = len(kj) + 1 + len(v)
	} else {
		p := c.kids[len(c.kids)-1]
		pos := cf.abs + p.off + p.size
		d.splice(pos, pos, comma, kj, colon, v)
		k.koff = pos - cf.abs + 1
		delta = 1 + len(kj) + 1 + len(v)
	}
	k.key, k.off, k.size, k.kind = key, k.koff+len(kj)+1, len(v), kindOf(v[0])
	c.kids = append(c.kids, k)
	if c.keys != nil {
		c.keys[key] = len(c.kids) - 1
	}
	c.size += delta
	return delta
}

func (d *Doc) insertElement(cf frame, idx int, v []byte) int {
	c := cf.n
	k := node{size: len(v), kind: kindOf(v[0])}
	var delta int
	switch {
	case len(c.kids) == 0:
		pos := cf.abs + c.size - 1 // the closing bracket
		d.splice(pos, pos, v)
		k.off, delta = pos-cf.abs, len(v)
	case idx == len(c.kids):
		p := c.kids[idx-1]
		pos := cf.abs + p.off + p.size
		d.splice(pos, pos, comma, v)
		k.off, delta = pos-cf.abs+1, len(v)+1
	default:
		pos := cf.abs + c.kids[idx].off
		d.splice(pos, pos, v, comma)
		k.off, delta = pos-cf.abs, len(v)+1
	}
	k.koff = k.off
	c.kids = append(c.kids, node{})
	copy(c.kids[idx+1:], c.kids[idx:])
	c.kids[idx] = k
	shiftKids(c.kids[idx+1:], delta)
	c.size += delta
	return delta
}

func (d *Doc) replaceChild(cf frame, idx int, v []byte) int {
	c := cf.n
	k := &c.kids[idx]
	a := cf.abs + k.off
	d.splice(a, a+k.size, v)
	delta := len(v) - k.size
	*k = node{key: k.key, koff: k.koff, off: k.off, size: len(v), kind: kindOf(v[0])}
	shiftKids(c.kids[idx+1:], delta)
	c.size += delta
	return delta
}

func (d *Doc) removeChild(cf frame, idx int) int {
	c := cf.n
	k := c.kids[idx]
	var a, b int
	switch {
	case len(c.kids) == 1:
		a, b = k.koff, k.off+k.size
	case idx == 0:
		a, b = k.koff, c.kids[1].koff
	default:
		p := c.kids[idx-1]
		a, b = p.off+p.size, k.off+k.size
	}
	d.splice(cf.abs+a, cf.abs+b, nil)
	delta := a - b
	c.kids = append(c.kids[:idx], c.kids[idx+1:]...)
	shiftKids(c.kids[idx:], delta)
	c.keys = nil
	c.size += delta
	return delta
}

func shiftKids(kids []node, delta int) {
	for i := range kids {
		kids[i].koff += delta
		kids[i].off += delta
	}
}

// splice replaces buf[a:b] with the concatenation of pieces, in place when
// the buffer has room.
func (d *Doc) splice(a, b int, pieces ...[]byte) {
	ins := 0
	for _, p := range pieces {
		ins += len(p)
	}
	if d.logging {
		d.undo = append(d.undo, undoRec{a: a, n: ins, old: append([]byte(nil), d.buf[a:b]...)})
	}
	d.edits++
	oldLen := len(d.buf)
	newLen := oldLen - (b - a) + ins
	var buf []byte
	if newLen <= cap(d.buf) {
		buf = d.buf[:max(oldLen, newLen)]
		bulk.Copy(buf[a+ins:], d.buf[b:oldLen])
	} else {
		// Grow geometrically so that a run of appends is amortised O(1).
		buf = make([]byte, newLen, newLen+newLen/2+512)
		bulk.Copy(buf, d.buf[:a])
		bulk.Copy(buf[a+ins:], d.buf[b:oldLen])
	}
	w := a
	for _, p := range pieces {
		w += bulk.Copy(buf[w:], p)
	}
	d.buf = buf[:newLen]
}

// index records the spans of a container's direct children.
func (d *Doc) index(n *node, abs int) error {
	if n.indexed || n.kind == 0 {
		return nil
	}
	b := d.buf
	n.kids = n.kids[:0]
	n.keys = nil
	i := skipWS(b, abs+1)
	end := abs + n.size - 1 // the closing bracket
	for i < end {
		var k node
		if n.kind == '{' {
			ke := skipString(b, i)
			k.key = decodeKey(b[i:ke])
			k.koff = i - abs
			i = skipWS(b, skipWS(b, ke)+1) // past ':'
		}
		ve := skipValue(b, i)
		k.off, k.size, k.kind = i-abs, ve-i, kindOf(b[i])
		if n.kind == '[' {
			k.koff = k.off
		}
		n.kids = append(n.kids, k)
		i = skipWS(b, ve)
		if b[i] == ',' {
			i = skipWS(b, i+1)
		}
	}
	if n.kind == '{' {
		if err := checkUnique(n); err != nil {
			n.kids = nil
			return err
		}
	}
	n.indexed = true
	return nil
}

// checkUnique refuses duplicate member names: which of two values a
// pointer means is unclear, and the validator only sees the last one.
func checkUnique(n *node) error {
	if len(n.kids) >= largeObject {
		n.keys = make(map[string]int, len(n.kids))
		for i, k := range n.kids {
			if _, dup := n.keys[k.key]; dup {
				n.keys = nil
				return fmt.Errorf("%w: duplicate member %q", ErrDocument, k.key)
			}
			n.keys[k.key] = i
		}
		return nil
	}
	for i := range n.kids {
		for j := i + 1; j < len(n.kids); j++ {
			if n.kids[i].key == n.kids[j].key {
				return fmt.Errorf("%w: duplicate member %q", ErrDocument, n.kids[i].key)
			}
		}
	}
	return nil
}

func lookup(n *node, key string) int {
	if len(n.kids) >= largeObject {
		if n.keys == nil {
			n.keys = make(map[string]int, len(n.kids))
			for i, k := range n.kids {
				n.keys[k.key] = i
			}
		}
		if i, ok := n.keys[key]; ok {
			return i
		}
		return -1
	}
	for i := range n.kids {
		if n.kids[i].key == key {
			return i
		}
	}
	return -1
}

func kindOf(c byte) byte {
	if c == '{' || c == '[' {
		return c
	}
	return 0
}

func isWS(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipWS(b []byte, i int) int {
	for i < len(b) && isWS(b[i]) {
		i++
	}
	return i
}

func trimWS(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && isWS(b[i]) {
		i++
	}
	for j > i && isWS(b[j-1]) {
		j--
	}
	return b[i:j]
}

// skipString returns the index just past the string starting at b[i] ('"').
// The document is known to be valid JSON.
func skipString(b []byte, i int) int {
	j := i + 1
	for {
		q := j + bytes.IndexByte(b[j:], '"')
		bs := 0
		for p := q - 1; b[p] == '\\'; p-- {
			bs++
		}
		if bs%2 == 0 {
			return q + 1
		}
		j = q + 1
	}
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j) - 1
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return len(b)
	default:
		for j := i; j < len(b); j++ {
			switch b[j] {
			case ',', '}', ']', ' ', '\t', '\n', '\r':
				return j
			}
		}
		return len(b)
	}
}

func decodeKey(raw []byte) string {
	if bytes.IndexByte(raw, '\\') < 0 && utf8.Valid(raw) {
		return string(raw[1 : len(raw)-1])
	}
	var s string
	_ = json.Unmarshal(raw, &s) // valid JSON string: cannot fail
	return s
}

func quoteKey(key string) []byte {
	simple := true
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c == '"' || c == '\\' || c >= 0x7f {
			simple = false
			break
		}
	}
	if simple {
		return []byte(`"` + key + `"`)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(key) // a string always encodes
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
}

func escapeToken(t string) string { return FormatPointer([]string{t})[1:] }

func quotePointer(p string) string {
	if p == "" {
		return `"" (the whole document)`
	}
	return strconv.Quote(p)
}
