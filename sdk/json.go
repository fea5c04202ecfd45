package sdk

import "github.com/wasmhist/wasmhist/internal/guestjson"

// JSONDecoder reads one JSON document in a single validating pass, without
// encoding/json: values come back as the exact bytes of the document, and
// only the strings and integers asked for are decoded. It is what the sdk
// decodes requests with, and what a plugin reads its state, its config or
// a sql result's JSON with to stay free of encoding/json (see
// sdktest.CheckLean); both sample Go plugins do. What it accepts is valid
// JSON and decodes as encoding/json decodes it; documents nested deeper
// than MaxJSONDepth are refused. Every failure is a *JSONSyntaxError with
// the offset where decoding stopped, matching ErrJSONSyntax.
//
// Its methods (documented on internal/guestjson's Decoder): Object calls a
// function with each member's key, positioned at its value; Array calls one
// for each element; ReadString, ReadStringAs, ReadInt, ReadInt64 and
// ReadNull decode a value; ReadValue returns a value's bytes, Skip passes
// over one and SkipIf over one equal to given bytes; Peek looks at the next
// value's first byte; End checks that nothing but space follows the
// document; Offset and Fail are for errors of one's own. See the example.
type JSONDecoder = guestjson.Decoder

// JSONSyntaxError is a JSONDecoder's failure.
type JSONSyntaxError = guestjson.SyntaxError

// MaxJSONDepth is the deepest nesting a JSONDecoder accepts.
const MaxJSONDepth = guestjson.MaxDepth

// ErrJSONSyntax is matched (errors.Is) by every error a JSONDecoder
// returns.
var ErrJSONSyntax = guestjson.ErrSyntax

// NewJSONDecoder returns a decoder of the document b. The values it
// returns are slices of b: keep b unchanged while they are in use.
func NewJSONDecoder(b []byte) JSONDecoder { return guestjson.NewDecoder(b) }
