package host

import (
	"bytes"
	"encoding/json"
	"maps"
	"sync"
	"unsafe"

	"github.com/wasmhist/wasmhist/abi"
)

// maxDecodedBytes is the least raw size of the messages a plugin's
// decodedMessages may remember; the bound is twice the largest history it
// decoded when that is more (see decode).
const maxDecodedBytes = 8 << 20

// decodedMessages remembers the messages the host decoded from a plugin's
// states, by their exact bytes. A provide that answers from_state gets the
// whole history each turn, and all but the newest messages are the bytes
// an earlier turn decoded: decoding them with encoding/json was most of a
// provide at 100 messages and more, native and WebAssembly alike.
//
// It also remembers the order of the last history it decoded, and expects
// each message to be the one that followed the previous message there: a
// history that grew by a turn, or a window that moved by one, is found by
// one compare of each message's bytes with the remembered bytes it is
// expected to be, in order, with no hash and no lookup in the map, whose
// entries a history of 100,000 messages scatters beyond the processor's
// caches. Where the expectation fails (an edited, reordered or other
// history) the map finds the message by its bytes, and the expectation
// resumes after it. Every message is matched by an exact compare of all its
// bytes, so nothing a plugin returns can make it answer a stale message
// (RATIONALE: "Why does provide find a history's messages in the order of
// the last one?").
//
// Every message handed out is a deep copy: callers own what they get and
// may edit it (RATIONALE: "Why does provide remember decoded messages?").
type decodedMessages struct {
	// floor, when set, replaces maxDecodedBytes as the least bound.
	floor int
	mu    sync.Mutex
	m     map[string]*decodedEntry
	bytes int
	// largest is the raw size of the largest history decoded since m
	// started over.
	largest int
	// last is the entries of the last history decoded, in its order; an
	// entry of a message it did not remember is nil. Every entry in last
	// is in m, and last is dropped when its pointers alone would pass the
	// bound on bytes (setLast).
	last []*decodedEntry
	// gen counts the changes of last.
	gen uint64
}

// decodedEntry is a remembered message: its exact bytes (the key it has
// in m) and its decoded form, never handed out.
type decodedEntry struct {
	raw string
	msg abi.Message
	// pos is where the entry was last put in decodedMessages.last: a hint,
	// true only when last[pos] is the entry.
	pos int
}

// decode decodes raws into msgs (of the same length), from memory where it
// can: a copy of the remembered message, or with shared the remembered
// message itself, which the caller must not hand out or edit. validate,
// when set, refuses a message's bytes before they are decoded, check a
// decoded message (nothing refused is remembered, so a remembered message
// passed both). On
// failure it returns the index of the message that failed, and either
// json's error or check's.
//
// The memory is bounded by the larger of maxDecodedBytes and twice the
// largest history decoded since it last started over, this one included,
// and a decode that would pass the bound starts it over with raws'
// messages alone: a history is always remembered whole, so the next
// provide of the same history and a turn more decodes the turn only, and
// the memory follows the histories in use down as well as up. A fixed
// bound below the history's size made every provide decode the whole
// history again, and refill the memory as often as it fitted in it:
// provide's cost grew 30 times for 10 times the messages.
func (c *decodedMessages) decode(raws []json.RawMessage, msgs []abi.Message, shared bool, validate func(json.RawMessage) error, check func(*abi.Message) error) (int, error) {
	var miss []int
	size, missSize := 0, 0
	c.mu.Lock()
	// raws[:same] are found at the start of last; tail holds the entries
	// of raws[same:], nil where a message is not remembered.
	same, next := 0, 0 // next: the index in last of the entry expected; -1: none
	var tail []*decodedEntry
	for i, raw := range raws {
		size += len(raw)
		var e *decodedEntry
		if next >= 0 && next < len(c.last) && c.last[next] != nil && c.last[next].raw == string(raw) {
			e = c.last[next]
			next++
		} else if e = c.m[string(raw)]; e != nil && e.pos < len(c.last) && c.last[e.pos] == e {
			next = e.pos + 1
		} else {
			next = -1
		}
		if i == same && i < len(c.last) && e != nil && c.last[i] == e {
			same++
		} else {
			tail = append(tail, e)
		}
		switch {
		case e == nil:
			miss = append(miss, i)
			missSize += len(raw)
		case shared:
			msgs[i] = e.msg
		default:
			msgs[i] = cloneMessage(e.msg)
		}
	}
	if len(miss) == 0 {
		c.setLast(same, tail)
		c.mu.Unlock()
		return 0, nil
	}
	gen := c.gen
	c.mu.Unlock()
	for _, i := range miss {
		if validate != nil {
			if err := validate(raws[i]); err != nil {
				return i, err
			}
		}
		if err := json.Unmarshal(raws[i], &msgs[i]); err != nil {
			return i, err
		}
		if check != nil {
			if err := check(&msgs[i]); err != nil {
				return i, err
			}
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	floor := maxDecodedBytes
	if c.floor > 0 {
		floor = c.floor
	}
	c.largest = max(c.largest, size)
	limit := max(floor, 2*c.largest)
	if c.m == nil || c.bytes+missSize > limit {
		// Start over with this history: what raws hit moves over, the
		// rest of the old memory goes.
		old := c.m
		c.m, c.bytes, c.largest = make(map[string]*decodedEntry, len(raws)), 0, size
		limit = max(floor, 2*size)
		for _, raw := range raws {
			if e, ok := old[string(raw)]; ok && c.bytes+len(raw) <= limit {
				if _, dup := c.m[string(raw)]; !dup {
					c.m[string(raw)] = e
					c.bytes += len(raw)
				}
			}
		}
		c.last = nil
		c.gen++
	}
	for _, i := range miss {
		if c.bytes+len(raws[i]) > limit {
			break
		}
		if _, ok := c.m[string(raws[i])]; !ok {
			raw := string(raws[i])
			c.m[raw] = &decodedEntry{raw: raw, msg: cloneMessage(msgs[i])}
			c.bytes += len(raws[i])
		}
	}
	if c.gen != gen {
		// The memory started over, or another decode changed last while
		// raws were decoded: the order is found again by bytes.
		same, tail = 0, make([]*decodedEntry, len(raws))
		for i, raw := range raws {
			tail[i] = c.m[string(raw)]
		}
	} else {
		// Every miss is in tail: a miss ends the run of raws found at the
		// start of last.
		for _, i := range miss {
			tail[i-same] = c.m[string(raws[i])]
		}
	}
	c.setLast(same, tail)
	return 0, nil
}

// setLast makes last its first same entries followed by tail, unless that
// would hold more than a pointer per byte the memory may hold. c.mu must be
// held.
func (c *decodedMessages) setLast(same int, tail []*decodedEntry) {
	if same == len(c.last) && len(tail) == 0 {
		return
	}
	c.gen++
	n := same + len(tail)
	floor := maxDecodedBytes
	if c.floor > 0 {
		floor = c.floor
	}
	if n*int(unsafe.Sizeof(tail[0])) > max(floor, 2*c.largest) {
		c.last = nil
		return
	}
	last := append(c.last[:same], tail...)
	for i := same; i < n; i++ {
		if last[i] != nil {
			last[i].pos = i
		}
	}
	c.last = last
}

// cloneMessage is a deep copy of m: nothing of it is shared with m.
func cloneMessage(m abi.Message) abi.Message {
	var cs []abi.Content
	if m.Contents != nil {
		cs = make([]abi.Content, len(m.Contents))
	}
	return cloneMessageInto(m, cs)
}

// contentsChunk is how many contents cloneMessages allocates at once.
const contentsChunk = 256

// cloneMessages replaces each of msgs with a deep copy (cloneMessage),
// allocating their contents contentsChunk at a time: one allocation a
// message was a fifth of a whole-history provide's instructions. Each
// message's contents are capped at their length, so an append to them
// reallocates and never writes into the next message's; a caller who keeps
// one message keeps at most one chunk's memory alive with it.
func cloneMessages(msgs []abi.Message) {
	var chunk []abi.Content
	for i := range msgs {
		m := &msgs[i]
		var cs []abi.Content
		if n := len(m.Contents); m.Contents != nil {
			if n > len(chunk) || chunk == nil {
				chunk = make([]abi.Content, max(n, contentsChunk))
			}
			cs, chunk = chunk[:n:n], chunk[n:]
		}
		*m = cloneMessageInto(*m, cs)
	}
}

// cloneMessageInto is cloneMessage with the copy's contents written to cs,
// of m.Contents' length (nil when m.Contents is nil).
func cloneMessageInto(m abi.Message, cs []abi.Content) abi.Message {
	if m.Contents != nil {
		for i, c := range m.Contents {
			c.Arguments = clonedRaw(c.Arguments)
			c.Result = clonedRaw(c.Result)
			c.Data = bytes.Clone(c.Data)
			if c.Usage != nil {
				u := *c.Usage
				c.Usage = &u
			}
			c.AdditionalProperties = cloneProps(c.AdditionalProperties)
			cs[i] = c
		}
		m.Contents = cs
	}
	if m.Source != nil {
		s := *m.Source
		m.Source = &s
	}
	m.AdditionalProperties = cloneProps(m.AdditionalProperties)
	return m
}

func clonedRaw(r json.RawMessage) json.RawMessage {
	if r == nil {
		return nil
	}
	return json.RawMessage(bytes.Clone([]byte(r)))
}

func cloneProps(p map[string]json.RawMessage) map[string]json.RawMessage {
	if p == nil {
		return nil
	}
	q := maps.Clone(p)
	for k, v := range q {
		q[k] = clonedRaw(v)
	}
	return q
}
