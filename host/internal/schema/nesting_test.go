package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/schemas"
)

// allocated is what f allocates, in bytes.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// refChain is a schema whose root reaches a type check through n $ref,
// each to the next definition.
func refChain(n int) string {
	var b strings.Builder
	b.WriteString(`{"$ref":"#/$defs/d0","$defs":{`)
	for i := range n {
		fmt.Fprintf(&b, `"d%d":{"$ref":"#/$defs/d%d"},`, i, i+1)
	}
	fmt.Fprintf(&b, `"d%d":{"type":"integer"}}}`, n)
	return b.String()
}

// TestNestingBounded: a failure n subschemas deep costs the library n²
// bytes of keyword location, and a document failing at every level n³.
// A validation nests at most maxDepth subschemas: a document or a chain
// of references deeper than that is refused without the cost (before:
// 1,500 levels allocated 20 GB in 11 s, a chain of 2,000 $ref 6.8 GB),
// and one within it is validated as before.
func TestNestingBounded(t *testing.T) {
	recursive, err := Compile(json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#"}},"required":["a"]}`), "recursive")
	require.NoError(t, err)
	assert.Equal(t, maxNesting, recursive.g.primary.r.maxDepth)

	// Two subschemas a level: the member's and the reference's.
	ok := strings.Repeat(`{"a":`, maxNesting/2-1) + "{}" + strings.Repeat("}", maxNesting/2-1)
	err = recursive.Validate(json.RawMessage(ok))
	require.ErrorIs(t, err, ErrInvalid)
	require.NotErrorIs(t, err, ErrTooCostly, "within the bound the failure is reported as before")
	assert.Contains(t, err.Error(), "missing properties: 'a'")
	assert.Contains(t, err.Error(), "at /a/a/a", "the location starts as it is")
	assert.Contains(t, err.Error(), "/a/a: missing", "and ends as it is")
	assert.Contains(t, err.Error(), "bytes)…", "a long location is clipped")
	assert.Less(t, len(err.Error()), 2*clipAt+200)

	for _, depth := range []int{maxNesting / 2, 999, 1500} {
		doc := strings.Repeat(`{"a":`, depth) + "{}" + strings.Repeat("}", depth)
		n := allocated(func() { err = recursive.Validate(json.RawMessage(doc)) })
		require.ErrorIs(t, err, ErrTooCostly, "%d levels", depth)
		assert.Contains(t, err.Error(), "validation stopped 256 subschemas deep")
		assert.Less(t, n, uint64(64<<20), "%d levels: allocated %d bytes", depth, n)
	}

	chain, err := Compile(json.RawMessage(refChain(2000)), "chain")
	require.NoError(t, err)
	n := allocated(func() { err = chain.Validate(json.RawMessage(`"x"`)) })
	require.ErrorIs(t, err, ErrTooCostly)
	assert.Contains(t, err.Error(), "schema chain: at (document root): validation stopped 256 subschemas deep")
	assert.Less(t, n, uint64(64<<20), "allocated %d bytes", n)
	short, err := Compile(json.RawMessage(refChain(200)), "short")
	require.NoError(t, err)
	require.NoError(t, short.Validate(json.RawMessage(`1`)))
	require.ErrorContains(t, short.Validate(json.RawMessage(`"x"`)), "expected integer, but got string")

	// A long name makes each level's location longer, and the bound lower.
	name := strings.Repeat("n", 2000)
	long, err := Compile(json.RawMessage(`{"type":"object","properties":{"`+name+`":{"$ref":"#"}}}`), "long")
	require.NoError(t, err)
	depth := long.g.primary.r.maxDepth
	assert.Less(t, depth, 40)
	nested := func(levels int) string {
		return strings.Repeat(`{"`+name+`":`, levels) + "1" + strings.Repeat("}", levels)
	}
	err = long.Validate(json.RawMessage(nested(depth/2 - 1)))
	require.ErrorContains(t, err, "expected object, but got number")
	require.NotErrorIs(t, err, ErrTooCostly)
	require.ErrorIs(t, long.Validate(json.RawMessage(nested(depth))), ErrTooCostly)
}

// TestFailuresHeldBounded: the library keeps every error until a
// validation ends (four million wrong elements held 2.6 GB). A validation
// stops once what its failures hold passes maxFailureBytes, saying what
// failed; failures a passing subschema discards (an anyOf's other branch)
// are not held.
func TestFailuresHeldBounded(t *testing.T) {
	strs, err := Compile(json.RawMessage(`{"type":"array","items":{"type":"string"}}`), "strings")
	require.NoError(t, err)
	const elements = 1_000_000
	v, err := Decode([]byte("["+strings.Repeat("1,", elements-1)+"1]"), "")
	require.NoError(t, err)
	n := allocated(func() { err = strs.ValidateValue(v) })
	t.Logf("stopped after %d failures, %d bytes allocated", strs.g.primary.r.failures, n)
	require.ErrorIs(t, err, ErrTooCostly)
	msg := err.Error()
	assert.Contains(t, msg, ": expected string, but got number (keyword")
	assert.Contains(t, msg, "at (document root): validation stopped after")
	assert.Contains(t, msg, "failures, whose errors would hold more than 128 MiB: the document, or a branch of the schema it tries, fails in too many places")
	assert.Equal(t, 1, strings.Count(msg, "expected string"), "one failure, then why it stopped")
	failures := strs.g.primary.r.failures
	assert.Less(t, failures, elements, "stopped before the end")
	// The errors held and what building them left behind; without the
	// bound, 1.3 GB.
	assert.Less(t, n, uint64(900<<20), "allocated %d bytes for %d failures", n, failures)

	// Every element fails the first branch and passes the second: a
	// failure an element's passing anyOf discards is not held.
	either, err := Compile(json.RawMessage(`{"type":"array","items":{"anyOf":[{"type":"string"},{"type":"number"}]}}`), "either")
	require.NoError(t, err)
	// 800,000 failures held would pass the bound.
	some := v.([]any)[:800_000]
	require.NoError(t, either.ValidateValue(some), "what a passing branch discards is not held")
	require.Equal(t, len(some), either.g.primary.r.failures)
}

// TestProjectSchemaUntrusted: a plugin's message is checked against the
// project's message schema, counted and wrapped as a plugin's schema is,
// and within the call's context: a message of 300,000 wrong parts took
// the validator about 15 s, with no deadline (100,000: 5.2 s, 1.3 GB).
func TestProjectSchemaUntrusted(t *testing.T) {
	msg := `{"role":"user","contents":[` + strings.Repeat(`{"type":"text","text":1},`, 300_000) + `{"type":"text","text":1}]}`
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	err := Project(schemas.Message).ValidateUntrusted(ctx, json.RawMessage(msg))
	require.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "schema message.json: validation stopped after")

	bg := context.Background()
	require.NoError(t, Project(schemas.Message).ValidateUntrusted(bg, json.RawMessage(`{"role":"user","contents":[{"type":"text","text":"hi"}]}`)))
	err = Project(schemas.Message).ValidateUntrusted(bg, json.RawMessage(`{"role":"user","contents":[{"type":"text","text":1}]}`))
	require.ErrorIs(t, err, ErrInvalid)
	assert.Contains(t, err.Error(), "schema message.json: at /contents/0/text: expected string, but got number (keyword message.json#/")
}

// TestValidateCounted: a document from outside the host (a file to
// import) is read as written, a long number too, and checked with the
// counted, wrapped copy of a project schema.
func TestValidateCounted(t *testing.T) {
	ms := Project(schemas.Message)
	long := `{"role":"user","contents":[{"type":"text","text":"hi"}],"usage":{"input_tokens":1` + strings.Repeat("0", 1200) + `}}`
	require.ErrorContains(t, ms.ValidateUntrusted(context.Background(), json.RawMessage(long)), "the host validates numbers of at most 1000 characters")
	err := ms.ValidateCounted(context.Background(), json.RawMessage(long))
	if err != nil {
		assert.NotContains(t, err.Error(), "numbers of at most")
	}
	require.NotNil(t, ms.counted, "the counted copy checked it")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	msg := `{"role":"user","contents":[` + strings.Repeat(`{"type":"text","text":1},`, 2000) + `{"type":"text","text":1}]}`
	require.ErrorIs(t, ms.ValidateCounted(ctx, json.RawMessage(msg)), context.Canceled, "the counted copy stops with its context")
}

// TestFailureWorkBounded: failures deep in a document each copy their
// keyword location, n² bytes at n levels. A document failing 300 times
// 200 subschemas deep is reported as before; past 1 GiB of copying, as
// estimated, the validation stops, saying why.
func TestFailureWorkBounded(t *testing.T) {
	s, err := Compile(json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"#"},"l":{"type":"array","items":{"type":"string"}}}}`), "deep")
	require.NoError(t, err)
	doc := func(levels, elements int) string {
		return strings.Repeat(`{"a":`, levels) + `{"l":[` + strings.Repeat("1,", elements) + `1]}` + strings.Repeat("}", levels)
	}
	err = s.Validate(json.RawMessage(doc(100, 300)))
	require.ErrorIs(t, err, ErrInvalid)
	require.NotErrorIs(t, err, ErrTooCostly)
	assert.Contains(t, err.Error(), "/l/0: expected string, but got number")
	assert.Contains(t, err.Error(), "and 296 more")

	n := allocated(func() { err = s.Validate(json.RawMessage(doc(100, 5000))) })
	require.ErrorIs(t, err, ErrTooCostly)
	assert.Contains(t, err.Error(), "whose locations, up to 256 subschemas deep, would copy more than 1024 MiB")
	assert.Less(t, n, uint64(3<<30), "allocated %d bytes", n)
}

// TestPluginSchemaOwnsItsSchemas: the library resolves a reference to a
// JSON Schema meta-schema to its own process-wide copy, which wrapping
// would rewrite for every later compile (one stopped validation then
// made a plain Compile panic); and an $id under the project's base would
// pass a plugin's schemas off as the project's, which are wrapped less.
// Both are refused; naming a project schema is not.
func TestPluginSchemaOwnsItsSchemas(t *testing.T) {
	for raw, says := range map[string]string{
		`{"$ref":"https://json-schema.org/draft/2020-12/schema"}`:                             "it refers to the meta-schema https://json-schema.org/draft/2020-12/schema",
		`{"properties":{"s":{"$ref":"https://json-schema.org/draft/2020-12/meta/core"}}}`:     "it refers to the meta-schema",
		`{"$id":"https://wasmhist.dev/schemas/v1/evil.json","properties":{"a":{"$ref":"#"}}}`: "its $id https://wasmhist.dev/schemas/v1/evil.json is under https://wasmhist.dev/schemas/v1/",
		`{"$id":"https://wasmhist.dev/schemas/v1/message.json","type":"object"}`:              "its $id https://wasmhist.dev/schemas/v1/message.json is under",
	} {
		_, err := Compile(json.RawMessage(raw), "p")
		require.ErrorIs(t, err, ErrBadSchema, raw)
		assert.ErrorContains(t, err, says, raw)
	}
	_, err := Compile(json.RawMessage(`{"items":{"$ref":"`+schemas.ID(schemas.Message)+`"}}`), "p")
	require.NoError(t, err)
	_, err = Compile(json.RawMessage(`{"properties":{"`+strings.Repeat("n", maxPiece)+`":true}}`), "p")
	require.ErrorIs(t, err, ErrBadSchema)
	assert.ErrorContains(t, err, "makes each level of a failure's location too long")
}

// TestClip: a long location keeps its start and end; a location the
// marker would not shorten is kept whole.
func TestClip(t *testing.T) {
	for _, n := range []int{0, clipAt, clipAt + 1, clipAt + 24, clipAt + 25, 1000, 1 << 20} {
		loc := strings.Repeat("/é", n/3) + strings.Repeat("a", n%3)
		got := clip(loc)
		assert.LessOrEqual(t, len(got), len(loc), "%d bytes", len(loc))
		assert.LessOrEqual(t, len(got), clipAt+24, "%d bytes", len(loc))
		assert.True(t, utf8.ValidString(got))
		if len(loc) > clipAt+24 {
			assert.Contains(t, got, "bytes)…")
			assert.True(t, strings.HasPrefix(loc, strings.SplitN(got, "…", 2)[0]))
		}
	}
}
