package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/schemas"
)

// doublingSchema recurses into member "a" along two paths at each level:
// MaxSchemaCost counts the recursion once, and a document n levels deep
// costs the validator 2^n evaluations of the last level.
const doublingSchema = `{"$defs":{"n":{"type":"object","allOf":[
	{"properties":{"a":{"$ref":"#/$defs/n"}}},
	{"properties":{"a":{"$ref":"#/$defs/n"}}}]}},
	"type":"object","properties":{"list":{"type":"array","items":{"$ref":"#/$defs/n"}}}}`

// nested is {"a":{"a":...{}}} n levels deep.
func nested(n int) string {
	return strings.Repeat(`{"a":`, n) + "{}" + strings.Repeat("}", n)
}

// listOf is a document whose list holds doc.
func listOf(doc string) string { return `{"list":[` + doc + `]}` }

// steps validates doc with s and returns the steps the validation took.
func steps(t *testing.T, s *Schema, doc string) (int, error) {
	t.Helper()
	err := s.Validate(json.RawMessage(doc))
	return s.g.primary.r.steps, err
}

// TestValidationStepsBounded: a schema that escapes MaxSchemaCost by
// recursing twice at each level compiles, and validating a deep document
// with it stops at the step bound with ErrTooCostly, whether the document
// is validated whole or one edit at a time (Local). Without the count,
// 40 levels take 2^40 evaluations.
func TestValidationStepsBounded(t *testing.T) {
	s, err := Compile(json.RawMessage(doublingSchema), "doubling")
	require.NoError(t, err)
	n, err := steps(t, s, listOf(nested(8)))
	require.NoError(t, err)
	assert.Greater(t, n, 1<<8, "each level doubles the steps")

	// 60 levels nest 180 subschemas, within maxNesting (TestNestingBounded
	// goes deeper).
	for _, depth := range []int{40, 60} {
		start := time.Now()
		n, err = steps(t, s, listOf(nested(depth)))
		t.Logf("%d levels: stopped after %d steps, %v", depth, n, time.Since(start))
		require.ErrorIs(t, err, ErrTooCostly, "%d levels", depth)
		require.ErrorIs(t, err, ErrInvalid)
		var ve *ValidationError
		require.ErrorAs(t, err, &ve)
		assert.Contains(t, ve.Error(), "schema doubling: at (document root): validation stopped after")
		assert.Contains(t, ve.Error(), "along more paths than it has")
		assert.LessOrEqual(t, n, baseSteps+checkEvery, "%d levels: steps past the bound", depth)
	}

	l, ok := s.Local(Edit{Path: []Step{{Token: "list"}}, ContainerArray: true, Key: "0", Kind: Insert})
	require.True(t, ok, "an element of list is checked alone")
	v, err := Decode([]byte(nested(40)), "")
	require.NoError(t, err)
	err = l.ValidateDecoded(v, "/list/0")
	require.ErrorIs(t, err, ErrTooCostly)
	assert.Contains(t, err.Error(), "at /list/0: validation stopped")
}

// TestValidationStepsScale: the bound grows with the document and the
// schema, so that large documents whose schemas evaluate each subschema
// once per path validate, however many steps they take: a long history of
// messages, a history of 20 images of 1 MiB (each a pattern and a content
// encoding read whole), and messages checked through a oneOf over the
// project's message schema. Each takes less than half its bound.
func TestValidationStepsScale(t *testing.T) {
	msg := schemas.ID(schemas.Message)
	text := func(i int) string {
		return fmt.Sprintf(`{"role":"user","contents":[{"type":"text","text":"message %d"}],"additional_properties":{"k":[1,2,{"x":"y"}]}}`, i)
	}
	image := `{"role":"user","contents":[{"type":"data","media_type":"image/png","data":"` + strings.Repeat("QUJD", 1<<18) + `"}]}`
	var oneOf []string
	for _, role := range []string{"user", "assistant", "system", "tool"} {
		oneOf = append(oneOf, `{"allOf":[{"$ref":"`+msg+`"},{"properties":{"role":{"const":"`+role+`"}}}]}`)
	}
	for _, tc := range []struct {
		name, items string
		n           int
		message     func(int) string
	}{
		{"20,000 messages", `{"$ref":"` + msg + `"}`, 20000, text},
		{"20 images of 1 MiB", `{"$ref":"` + msg + `"}`, 20, func(int) string { return image }},
		{"2,000 messages through a oneOf", `{"oneOf":[` + strings.Join(oneOf, ",") + `]}`, 2000, text},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Compile(json.RawMessage(`{"type":"object","properties":{"messages":{"type":"array","items":`+tc.items+`}}}`), "history")
			require.NoError(t, err)
			var msgs []string
			for i := range tc.n {
				msgs = append(msgs, tc.message(i))
			}
			doc := `{"messages":[` + strings.Join(msgs, ",") + `]}`
			v, err := Decode([]byte(doc), "")
			require.NoError(t, err)
			n, err := steps(t, s, doc)
			require.NoError(t, err)
			bound := 2 * s.g.cost * size(v)
			t.Logf("%d steps; cost %d, size %d: bound %d", n, s.g.cost, size(v), bound)
			assert.Greater(t, n, baseSteps, "the document takes more than the base")
			assert.Less(t, 2*n, bound, "within half the bound")
		})
	}
}

// TestValidationStopsWithItsContext: a validation stops soon after its
// context ends, with the context's error.
func TestValidationStopsWithItsContext(t *testing.T) {
	s, err := Compile(json.RawMessage(doublingSchema), "doubling")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = s.ValidateContext(ctx, json.RawMessage(`{"list":[`+strings.Repeat(nested(18)+",", 999)+nested(18)+`]}`))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.NotErrorIs(t, err, ErrInvalid, "the document was not found invalid")
	assert.Contains(t, err.Error(), "schema doubling: validation stopped after")
}

// TestValidationCopies: validations that overlap each count their own
// steps, on copies of the schema; each gets its own verdict.
func TestValidationCopies(t *testing.T) {
	s, err := Compile(json.RawMessage(doublingSchema), "doubling")
	require.NoError(t, err)
	l, ok := s.Local(Edit{Path: []Step{{Token: "list"}}, ContainerArray: true, Key: "0", Kind: Insert})
	require.True(t, ok)
	good, bad := nested(6), nested(30)
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 4 {
				doc := good
				if j == i {
					doc = bad
				}
				var err error
				if i%2 == 0 {
					err = s.Validate(json.RawMessage(listOf(doc)))
				} else {
					v, derr := Decode([]byte(doc), "")
					require.NoError(t, derr)
					err = l.ValidateDecoded(v, "/list/0")
				}
				if doc == bad {
					assert.ErrorIs(t, err, ErrTooCostly)
				} else {
					assert.NoError(t, err)
				}
			}
		}()
	}
	wg.Wait()
	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	assert.False(t, s.g.primaryBusy, "the primary was given back")
	assert.LessOrEqual(t, len(s.g.free), maxFreeCopies)
}

// BenchmarkValidateHistory validates a history of 200 messages with a
// plugin's schema that refers to the project's message schema, counted
// (as every plugin schema is) and, for comparison, without the count.
func BenchmarkValidateHistory(b *testing.B) {
	raw := json.RawMessage(`{"type":"object","properties":{"messages":{"type":"array","items":{"$ref":"` + schemas.ID(schemas.Message) + `"}}}}`)
	var msgs []string
	for i := range 200 {
		msgs = append(msgs, fmt.Sprintf(`{"role":"user","contents":[{"type":"text","text":"message %d"}]}`, i))
	}
	v, err := Decode([]byte(`{"messages":[`+strings.Join(msgs, ",")+`]}`), "")
	require.NoError(b, err)
	counted, err := Compile(raw, "history")
	require.NoError(b, err)
	root, err := compileRoot(raw, "history")
	require.NoError(b, err)
	plain := &Schema{name: "history", s: root}
	for _, bc := range []struct {
		name string
		s    *Schema
	}{{"counted", counted}, {"plain", plain}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if err := bc.s.validate(v, ""); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestNumbersBounded: a number the validator would spend without bound on
// (a million digits, an exponent of a million, past which its parse fails
// and it dereferences nil) is refused when a plugin's document is decoded
// (DecodeUntrusted, and a plugin schema's Validate), on either path, and
// when a plugin's schema compiles; numbers at the bounds pass; a stored
// document (Decode) keeps whatever it holds.
func TestNumbersBounded(t *testing.T) {
	deep := func(lit string) string {
		return strings.Repeat("[", 1001) + lit + strings.Repeat("]", 1001) // past guestjson's depth: encoding/json's path
	}
	for _, lit := range []string{"1e1001", "1E-1001", "1e1000001", "-2.5e+999999", "1" + strings.Repeat("0", 1000)} {
		for _, doc := range []string{`{"n":[` + lit + `]}`, deep(lit)} {
			_, err := DecodeUntrusted([]byte(doc), "doc")
			require.ErrorIs(t, err, ErrInvalid, "%.40s", doc)
			assert.ErrorContains(t, err, "the host validates numbers of at most 1000 characters, with an exponent within ±1000")
			_, err = Decode([]byte(doc), "doc")
			require.NoError(t, err, "a stored document is read as written")
		}
		plugin, err := Compile(json.RawMessage(`{"type":"object"}`), "plugin")
		require.NoError(t, err)
		require.ErrorIs(t, plugin.Validate(json.RawMessage(`{"n":`+lit+`}`)), ErrInvalid, "a plugin's schema validates a plugin's document")
		_, err = Compile(json.RawMessage(`{"multipleOf":`+lit+`}`), "huge")
		require.ErrorIs(t, err, ErrBadSchema, lit)
	}
	for _, lit := range []string{"1e1000", "-1E-1000", "9" + strings.Repeat("9", 999), "0.5e+17"} {
		_, err := DecodeUntrusted([]byte(`{"n":`+lit+`}`), "doc")
		require.NoError(t, err, lit)
		s, err := Compile(json.RawMessage(`{"properties":{"n":{"type":"number","minimum":`+lit+`}}}`), "bound")
		require.NoError(t, err, lit)
		_ = s.Validate(json.RawMessage(`{"n":` + lit + `}`))
	}
}

// TestValidatorPanicIsAnError: a panic of the validator on a document is
// a refused document, on a plugin's schema and the project's: the library
// dereferences nil on a number whose exponent passes 10^6 (which Decode
// refuses; handed over decoded, it reaches the library).
func TestValidatorPanicIsAnError(t *testing.T) {
	v := map[string]any{"n": json.Number("1e1000001")}
	s, err := Compile(json.RawMessage(`{"properties":{"n":{"type":"integer"}}}`), "plugin")
	require.NoError(t, err)
	err = s.ValidateValue(v)
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "the validator failed on the document")
	usage := map[string]any{"role": "assistant", "contents": []any{map[string]any{"type": "usage", "usage": map[string]any{"input_tokens": json.Number("1e1000001")}}}}
	err = Project(schemas.Message).ValidateValue(usage)
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "the validator failed on the document")
}

// TestRegexBounded: a pattern whose program passes maxRegexCost (its
// repeats expanded) is refused when a plugin's schema compiles, as a
// "pattern" or a "patternProperties" name, before the library compiles
// it; a document's string under format "regex" is checked alike. Patterns
// of ordinary size pass.
func TestRegexBounded(t *testing.T) {
	huge := strings.Repeat("[a-z]{1000}", 10)
	for _, raw := range []string{
		`{"pattern":"` + huge + `"}`,
		`{"properties":{"a":{"items":{"pattern":"(` + huge + `)+"}}}}`,
		`{"patternProperties":{"^` + huge + `$":{}}}`,
	} {
		_, err := Compile(json.RawMessage(raw), "regex")
		require.ErrorIs(t, err, ErrBadSchema, "%.60s", raw)
		assert.ErrorContains(t, err, "instructions (repeats expanded), which the host does not compile or run")
	}
	s, err := Compile(json.RawMessage(`{"type":"object","examples":[{"pattern":"`+huge+`"}],"properties":{
		"id":{"type":"string","pattern":"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"},
		"p":{"const":{"pattern":"`+huge+`"}},
		"re":{"type":"string","format":"regex"},
		"pattern":{"type":"string"}}}`), "ordinary")
	require.NoError(t, err)
	require.NoError(t, s.Validate(json.RawMessage(`{"id":"0123abcd-0000-1111-2222-333344445555","re":"^a+(b|c)*$","pattern":"`+huge+`"}`)),
		"a member named pattern is a string of the document, not a pattern")
	err = s.Validate(json.RawMessage(`{"re":"` + huge + `"}`))
	require.ErrorIs(t, err, ErrInvalid, "a document's regex past the bound")
	assert.ErrorContains(t, err, "/re")
}

// TestLongStringsCounted: a subschema that reads a string whole (format,
// pattern, enum) counts a step per 64 of its bytes; a string under a plain
// type counts one step, whatever its length. So a call's deadline is
// looked at between a hundred failing checks of a 4 MiB string (each
// quoting it whole in its message: 400 MB and 10 s in all), where it
// was looked at once per 1,024 steps of any size.
func TestLongStringsCounted(t *testing.T) {
	var checks []string
	for range 100 {
		checks = append(checks, `{"format":"date"}`)
	}
	s, err := Compile(json.RawMessage(`{"properties":{"d":{"allOf":[`+strings.Join(checks, ",")+`]},"t":{"type":"string"}}}`), "dates")
	require.NoError(t, err)
	long := strings.Repeat("x", 4<<20)
	n, err := steps(t, s, `{"t":"`+long+`"}`)
	require.NoError(t, err)
	assert.Less(t, n, 10, "a plain string counts one step")
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()
	<-ctx.Done()
	err = s.ValidateContext(ctx, json.RawMessage(`{"d":"`+long+`"}`))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	n = s.g.primary.r.steps
	assert.GreaterOrEqual(t, n, (4<<20)/bytesPerStep, "the string's bytes were counted")
	assert.Less(t, n, 3*(4<<20)/bytesPerStep, "stopped at the first checks after the deadline")
}

// TestPatternMatchBounded: a plugin schema's pattern matches a string only
// while the string's length times the pattern's size is within
// maxPatternWork (a 1,000-instruction pattern against 1 MiB would be one
// uninterruptible step of seconds); past it the string is refused, saying
// why, and within it the pattern says what the library's keyword says.
func TestPatternMatchBounded(t *testing.T) {
	s, err := Compile(json.RawMessage(`{"properties":{"small":{"type":"string","pattern":"^(a|b)+$"},"big":{"type":"string","pattern":"^[a-z]{1000}"}}}`), "patterns")
	require.NoError(t, err)
	require.NoError(t, s.Validate(json.RawMessage(`{"small":"`+strings.Repeat("ab", 2<<20)+`"}`)), "4 MiB against a small pattern")
	err = s.Validate(json.RawMessage(`{"small":"abc"}`))
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, `at /small: does not match pattern '^(a|b)+$' (keyword https://wasmhist.dev/plugin-schemas/patterns.json#/properties/small/pattern)`)
	require.NoError(t, s.Validate(json.RawMessage(`{"big":"`+strings.Repeat("x", 1000)+`"}`)))
	err = s.Validate(json.RawMessage(`{"big":"` + strings.Repeat("x", 1<<20) + `"}`))
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "a string of 1048576 bytes is too long to match against pattern '^[a-z]{1000}'")
}

// TestPatternPropertiesNamesBounded: the library matches each member name
// against every patternProperties name, in one step: a 1 MiB name against
// a 1,000-instruction pattern would be seconds. Past 2^27 of length times
// pattern size, the object is refused before the match, saying why.
func TestPatternPropertiesNamesBounded(t *testing.T) {
	s, err := Compile(json.RawMessage(`{"patternProperties":{"^[a-z]{1000}":{"type":"string"}}}`), "names")
	require.NoError(t, err)
	require.NoError(t, s.Validate(json.RawMessage(`{"`+strings.Repeat("X", 1000)+`":1}`)), "a name that does not match")
	err = s.Validate(json.RawMessage(`{"` + strings.Repeat("y", 1000) + `":1}`))
	require.ErrorContains(t, err, "expected string, but got number", "a name that matches")
	require.NotErrorIs(t, err, ErrTooCostly)
	err = s.Validate(json.RawMessage(`{"` + strings.Repeat("x", 1<<20) + `":1}`))
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "at (document root): a member name of 1048576 bytes is too long to match against patternProperties of about 1003 instructions in all")
	assert.Less(t, len(err.Error()), 400)

	// The same through one edit's check (Local), which validates the
	// wrapper of the edited value's schema, not what it wraps; and an
	// edit whose path has such a name leaves it to the whole document's.
	inner, err := Compile(json.RawMessage(`{"properties":{"x":{"patternProperties":{"^[a-z]{1000}":{"type":"string"}}}},
		"additionalProperties":{"patternProperties":{"^[a-z]{1000}":{"type":"object"}}}}`), "names")
	require.NoError(t, err)
	l, ok := inner.Local(Edit{Key: "x", Kind: Replace})
	require.True(t, ok)
	err = l.Validate(json.RawMessage(`{"`+strings.Repeat("x", 1<<20)+`":"s"}`), "/x")
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "at /x: a member name of 1048576 bytes is too long")
	_, ok = inner.Local(Edit{Path: []Step{{Token: "y"}}, Key: strings.Repeat("x", 1<<20), Kind: Insert})
	assert.False(t, ok, "a name past the bound in the path")
	_, ok = inner.Local(Edit{Path: []Step{{Token: "y"}}, Key: "k", Kind: Insert})
	assert.True(t, ok)
}
