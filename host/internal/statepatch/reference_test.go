package statepatch

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"

	"github.com/wasmhist/wasmhist/abi"
)

// refApply is a plain RFC 6902 implementation on decoded values, the oracle
// the tests compare Doc against.
func refApply(doc any, ops []abi.PatchOp) (any, error) {
	for _, op := range ops {
		tokens, err := ParsePointer(op.Path)
		if err != nil {
			return nil, err
		}
		var v any
		if op.Op == abi.PatchAdd || op.Op == abi.PatchReplace {
			if v, err = decode(op.Value); err != nil {
				return nil, err
			}
		} else if op.Op != abi.PatchRemove {
			return nil, errors.New("bad op")
		}
		if doc, err = refOp(doc, tokens, op.Op, v); err != nil {
			return nil, err
		}
	}
	return doc, nil
}

func refOp(cur any, tokens []string, op string, v any) (any, error) {
	if len(tokens) == 0 {
		if op == abi.PatchRemove {
			return nil, errors.New("remove root")
		}
		return v, nil
	}
	t, rest := tokens[0], tokens[1:]
	switch c := cur.(type) {
	case map[string]any:
		old, ok := c[t]
		if len(rest) == 0 {
			switch {
			case op == abi.PatchAdd:
				c[t] = v
			case !ok:
				return nil, errors.New("missing")
			case op == abi.PatchRemove:
				delete(c, t)
			default:
				c[t] = v
			}
			return c, nil
		}
		if !ok {
			return nil, errors.New("missing")
		}
		n, err := refOp(old, rest, op, v)
		if err != nil {
			return nil, err
		}
		c[t] = n
		return c, nil
	case []any:
		if len(rest) == 0 && op == abi.PatchAdd {
			i := len(c)
			if t != "-" {
				var err error
				if i, err = arrayIndex(t, len(c), true); err != nil {
					return nil, err
				}
			}
			c = append(c, nil)
			copy(c[i+1:], c[i:])
			c[i] = v
			return c, nil
		}
		i, err := arrayIndex(t, len(c), false)
		if err != nil {
			return nil, err
		}
		if len(rest) == 0 {
			if op == abi.PatchRemove {
				return append(c[:i], c[i+1:]...), nil
			}
			c[i] = v
			return c, nil
		}
		n, err := refOp(c[i], rest, op, v)
		if err != nil {
			return nil, err
		}
		c[i] = n
		return c, nil
	default:
		return nil, errors.New("not a container: " + strconv.Quote(t))
	}
}

func decode(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("trailing data")
	}
	return v, nil
}

func sameJSON(a, b []byte) bool {
	va, err1 := decode(a)
	vb, err2 := decode(b)
	return err1 == nil && err2 == nil && reflect.DeepEqual(va, vb)
}

// hasDuplicateKeys reports whether any object in b repeats a member name;
// Doc refuses those where it indexes, the oracle silently keeps the last.
func hasDuplicateKeys(b []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(b))
	type frame struct {
		keys    map[string]bool // nil for arrays
		wantKey bool
	}
	var stack []*frame
	valueDone := func() {
		if len(stack) > 0 && stack[len(stack)-1].keys != nil {
			stack[len(stack)-1].wantKey = true
		}
	}
	for {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		switch tok := tok.(type) {
		case json.Delim:
			switch tok {
			case '{':
				stack = append(stack, &frame{keys: map[string]bool{}, wantKey: true})
			case '[':
				stack = append(stack, &frame{})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			if len(stack) > 0 {
				if f := stack[len(stack)-1]; f.keys != nil && f.wantKey {
					if f.keys[tok] {
						return true
					}
					f.keys[tok], f.wantKey = true, false
					continue
				}
			}
			valueDone()
		default:
			valueDone()
		}
	}
}
