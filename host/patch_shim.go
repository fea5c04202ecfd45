package host

// TEMPORARY: a plain JSON Patch until host/internal/statepatch lands; it
// decodes the whole state, so it is correct but not fast.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/schema"
)

// applyPatch applies ops to state and validates the result against s.
var applyPatch = func(state json.RawMessage, ops []abi.PatchOp, s *schema.Schema) (json.RawMessage, error) {
	dec := json.NewDecoder(bytes.NewReader(state))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	for i, op := range ops {
		var val any
		if op.Op != abi.PatchRemove {
			d := json.NewDecoder(bytes.NewReader(op.Value))
			d.UseNumber()
			if err := d.Decode(&val); err != nil {
				return nil, fmt.Errorf("state_patch[%d]: value: %v", i, err)
			}
		}
		var err error
		if doc, err = patchOne(doc, op.Op, op.Path, val); err != nil {
			return nil, fmt.Errorf("state_patch[%d] %s %s: %v", i, op.Op, op.Path, err)
		}
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	if err := s.Validate(out); err != nil {
		return nil, err
	}
	return out, nil
}

func patchOne(doc any, op, path string, val any) (any, error) {
	if path == "" {
		if op == abi.PatchRemove {
			return nil, fmt.Errorf("cannot remove the root")
		}
		return val, nil
	}
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("path must start with /")
	}
	toks := strings.Split(path[1:], "/")
	for i := range toks {
		toks[i] = strings.ReplaceAll(strings.ReplaceAll(toks[i], "~1", "/"), "~0", "~")
	}
	var set func(cur any, toks []string) (any, error)
	set = func(cur any, toks []string) (any, error) {
		last := len(toks) == 1
		switch c := cur.(type) {
		case map[string]any:
			k := toks[0]
			if !last {
				child, ok := c[k]
				if !ok {
					return nil, fmt.Errorf("missing parent %q", k)
				}
				n, err := set(child, toks[1:])
				if err != nil {
					return nil, err
				}
				c[k] = n
				return c, nil
			}
			_, ok := c[k]
			switch op {
			case abi.PatchAdd:
				c[k] = val
			case abi.PatchReplace:
				if !ok {
					return nil, fmt.Errorf("no member %q", k)
				}
				c[k] = val
			case abi.PatchRemove:
				if !ok {
					return nil, fmt.Errorf("no member %q", k)
				}
				delete(c, k)
			}
			return c, nil
		case []any:
			idx := len(c)
			if toks[0] != "-" {
				n, err := strconv.Atoi(toks[0])
				if err != nil || n < 0 || n > len(c) {
					return nil, fmt.Errorf("bad index %q", toks[0])
				}
				idx = n
			} else if !last || op != abi.PatchAdd {
				return nil, fmt.Errorf("'-' only appends")
			}
			if !last {
				if idx >= len(c) {
					return nil, fmt.Errorf("index %d out of range", idx)
				}
				n, err := set(c[idx], toks[1:])
				if err != nil {
					return nil, err
				}
				c[idx] = n
				return c, nil
			}
			switch op {
			case abi.PatchAdd:
				c = append(c, nil)
				copy(c[idx+1:], c[idx:])
				c[idx] = val
			case abi.PatchReplace, abi.PatchRemove:
				if idx >= len(c) {
					return nil, fmt.Errorf("index %d out of range", idx)
				}
				if op == abi.PatchReplace {
					c[idx] = val
				} else {
					c = append(c[:idx], c[idx+1:]...)
				}
			}
			return c, nil
		}
		return nil, fmt.Errorf("cannot descend into a scalar")
	}
	return set(doc, toks)
}
