package host

import (
	"bytes"
	"encoding/json"
	"maps"
	"sync"

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
// provide at 100 messages and more, native and WebAssembly alike. A copy
// of a remembered message costs a map lookup (one pass of the runtime's
// hash over the bytes) and one allocation per message for its contents.
//
// Every message handed out is a deep copy: callers own what they get and
// may edit it (RATIONALE: "Why does provide remember decoded messages?").
type decodedMessages struct {
	// floor, when set, replaces maxDecodedBytes as the least bound.
	floor int
	mu    sync.Mutex
	m     map[string]abi.Message
	bytes int
	// largest is the raw size of the largest history decoded since m
	// started over.
	largest int
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
	for i, raw := range raws {
		size += len(raw)
		if m, ok := c.m[string(raw)]; ok && shared {
			msgs[i] = m
		} else if ok {
			msgs[i] = cloneMessage(m)
		} else {
			miss = append(miss, i)
			missSize += len(raw)
		}
	}
	c.mu.Unlock()
	if len(miss) == 0 {
		return 0, nil
	}
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
		c.m, c.bytes, c.largest = make(map[string]abi.Message, len(raws)), 0, size
		limit = max(floor, 2*size)
		for _, raw := range raws {
			if m, ok := old[string(raw)]; ok && c.bytes+len(raw) <= limit {
				if _, dup := c.m[string(raw)]; !dup {
					c.m[string(raw)] = m
					c.bytes += len(raw)
				}
			}
		}
	}
	for _, i := range miss {
		if c.bytes+len(raws[i]) > limit {
			break
		}
		if _, ok := c.m[string(raws[i])]; !ok {
			c.m[string(raws[i])] = cloneMessage(msgs[i])
			c.bytes += len(raws[i])
		}
	}
	return 0, nil
}

// cloneMessage is a deep copy of m: nothing of it is shared with m.
func cloneMessage(m abi.Message) abi.Message {
	if m.Contents != nil {
		cs := make([]abi.Content, len(m.Contents))
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
