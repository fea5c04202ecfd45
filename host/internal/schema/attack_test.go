package schema

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestWorkBetweenStepsBounded: each case is one evaluation that cost the
// library far more than the step it counted, found by an attack on the
// bounds; the figure before is in each case's comment. Each now ends
// within what the bounds allow, with the error that says why.
func TestWorkBetweenStepsBounded(t *testing.T) {
	numbers := func(n int, lit string) string {
		return "[" + strings.Repeat(lit+",", n-1) + lit + "]"
	}
	var enum []string
	for i := range maxEnum {
		enum = append(enum, fmt.Sprint(i))
	}
	ones := strings.Repeat("1,", 200_000)
	var uniques []string
	for range 200 {
		uniques = append(uniques, `{"uniqueItems":true}`)
	}
	var patterns []string
	for i := range 40 {
		patterns = append(patterns, fmt.Sprintf(`"[0-9]#%d":{}`, i))
	}
	anyTree := `{"$defs":{"n":{"type":["object","array"],"additionalProperties":{"$ref":"#/$defs/n"},"items":{"$ref":"#/$defs/n"}}},"$ref":"#/$defs/n"}`
	for _, tt := range []struct {
		name, schema, doc string
		deadline          time.Duration
		want              error  // the error it ends with
		says              string // and a part of what it says
		alloc             uint64 // an allocation it stays under
	}{
		// The library's duration check copies the string once per unit:
		// 400 KB took 21 s and 19.8 GB.
		{"a long duration", `{"properties":{"d":{"type":"string","format":"duration"}}}`, `{"d":"P` + strings.Repeat("1Y", 200_000) + `"}`,
			0, ErrInvalid, "is not valid 'duration'", 32 << 20},
		// Each name is matched against every pattern: 40 small patterns and
		// one 8 MiB name took 13 s in two steps.
		{"many patterns, one long name", `{"patternProperties":{` + strings.Join(patterns, ",") + `}}`, `{"` + strings.Repeat("a", 8<<20) + `":1}`,
			0, ErrInvalid, "too long to match against patternProperties of about", 64 << 20},
		// An enum check compares a number with each value, parsing both:
		// 1,500 elements under 20,000 values took 43.6 s under a 100 ms
		// deadline (an enum holds at most maxEnum now).
		{"an enum of numbers", `{"type":"array","items":{"enum":[` + strings.Join(enum, ",") + `]}}`, numbers(20_000, "4095"),
			100 * time.Millisecond, context.DeadlineExceeded, "validation stopped after", 1 << 30},
		// uniqueItems compares elements whole: 200 checks of 400,000
		// numbers took 66.8 s and 9.2 GB, the context never looked at.
		{"uniqueItems on long elements", `{"allOf":[` + strings.Join(uniques, ",") + `]}`, `[[` + ones + `0],[` + ones + `2]]`,
			100 * time.Millisecond, context.DeadlineExceeded, "validation stopped after", 2 << 30},
		// Each failure quotes the const: 300 failures of a 4 MiB const
		// held 1.75 GB.
		{"a long const quoted", `{"type":"array","items":{"const":"` + strings.Repeat("c", 4<<20) + `"}}`, numbers(300, "1"),
			0, ErrTooCostly, "whose errors would hold more than 128 MiB", 1 << 30},
		// Each element below a 16 MiB name copies its location: 1,000
		// elements allocated 16 GB, 8.2 GB under a 100 ms deadline.
		{"a long name above many elements", anyTree, `{"` + strings.Repeat("n", 16<<20) + `":` + numbers(1000, "{}") + `}`,
			100 * time.Millisecond, context.DeadlineExceeded, "validation stopped after", 2 << 30},
	} {
		t.Run(tt.name, func(t *testing.T) {
			s, err := Compile(json.RawMessage(tt.schema), "attack")
			require.NoError(t, err)
			v, err := DecodeUntrusted([]byte(tt.doc), "attack")
			require.NoError(t, err)
			ctx := context.Background()
			if tt.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tt.deadline)
				defer cancel()
			}
			n := allocated(func() { err = s.check(ctx, v, "", nil) })
			require.ErrorIs(t, err, tt.want)
			assert.Contains(t, err.Error(), tt.says)
			assert.Less(t, n, tt.alloc, "allocated %d bytes", n)
		})
	}
}

// TestSchemaObjectsBounded: the library compiles a schema in time
// quadratic in its subschemas (60,000 properties: 100 s), and compiles
// it again for each validation that overlaps another. A plugin's schema
// holds at most maxSchemaObjects objects.
func TestSchemaObjectsBounded(t *testing.T) {
	props := func(n int) string {
		var p []string
		for i := range n {
			p = append(p, fmt.Sprintf(`"p%d":{"type":"string"}`, i))
		}
		return `{"type":"object","properties":{` + strings.Join(p, ",") + `}}`
	}
	_, err := Compile(json.RawMessage(props(maxSchemaObjects-2)), "wide")
	require.NoError(t, err)
	_, err = Compile(json.RawMessage(props(maxSchemaObjects)), "wide")
	require.ErrorIs(t, err, ErrBadSchema)
	assert.ErrorContains(t, err, "the schema holds 2050 objects, and the host compiles at most 2048")

	// A long enum is one object: its values are bounded apart (a million
	// took 2.9 s to compile, and a comparison with each 36 s).
	enum := func(n int) string { return `{"enum":[` + strings.Repeat("0,", n-1) + `0]}` }
	_, err = Compile(json.RawMessage(enum(maxEnum)), "enum")
	require.NoError(t, err)
	_, err = Compile(json.RawMessage(enum(maxEnum+1)), "enum")
	require.ErrorIs(t, err, ErrBadSchema)
	assert.ErrorContains(t, err, "an enum of 4097 values")
	_, err = Compile(json.RawMessage(`{"const":[`+strings.Repeat("0,", maxSchemaValues)+`0]}`), "const")
	require.ErrorIs(t, err, ErrBadSchema)
	assert.ErrorContains(t, err, "values, and the host compiles at most 65536")
}

// TestDiscardedInsideAFailure: failures a passing branch discards inside
// a subschema that fails anyway are not held: the failure holds its own
// tree only. A contains whose schema fails on minimum after an anyOf
// discarded a 1 MiB const's failure was refused where the library
// accepts it.
func TestDiscardedInsideAFailure(t *testing.T) {
	// Each element's failure would hold a 512 KiB message: 300 pass the
	// bound.
	raw := `{"contains":{"minimum":5,"anyOf":[{"const":"` + strings.Repeat("c", 512<<10) + `"},true]}}`
	s, err := Compile(json.RawMessage(raw), "discard")
	require.NoError(t, err)
	require.NoError(t, s.Validate(json.RawMessage("["+strings.Repeat("1,", 300)+"10]")))
	require.ErrorContains(t, s.Validate(json.RawMessage(`[1,2]`)), "must be >= 5")
}

// TestLocalLongAt: a Local's at is added to the problems kept, not to
// every failure (1,000 failures under a 1 MiB name allocated 1 GB).
func TestLocalLongAt(t *testing.T) {
	s, err := Compile(json.RawMessage(`{"additionalProperties":{"items":{"type":"string"}}}`), "at")
	require.NoError(t, err)
	name := strings.Repeat("n", 1<<20)
	l, ok := s.Local(Edit{Key: name, Kind: Insert})
	require.True(t, ok)
	v, err := Decode([]byte("["+strings.Repeat("1,", 999)+"1]"), "")
	require.NoError(t, err)
	n := allocated(func() { err = l.ValidateDecoded(v, "/"+name) })
	require.ErrorContains(t, err, "expected string, but got number")
	assert.Contains(t, err.Error(), "and 995 more")
	assert.Less(t, n, uint64(64<<20), "allocated %d bytes", n)
}

// TestStepsCountWhatKeywordsRead: a second attack found keywords whose
// work a step did not count, each checked here by the steps or the
// error it now gives (the figures before in the comments).
func TestStepsCountWhatKeywordsRead(t *testing.T) {
	steps := func(t *testing.T, schema, doc string) (int, error) {
		s, err := Compile(json.RawMessage(schema), "read")
		require.NoError(t, err)
		err = s.Validate(json.RawMessage(doc))
		return s.g.primary.r.steps, err
	}
	long := strings.Repeat("a", 64<<10)
	// minLength and maxLength count the string's characters: a doubling
	// schema of 2^12 maxLength checks of 7 MiB took 51 s.
	n, err := steps(t, `{"maxLength":1}`, `"`+long+`"`)
	require.ErrorContains(t, err, "length must be <= 1")
	assert.GreaterOrEqual(t, n, len(long)/bytesPerStep)
	// additionalProperties false quotes each name it refuses: 2^10 such
	// failures of a 7 MiB name took 11 s and 6.2 GB.
	n, err = steps(t, `{"not":{"additionalProperties":false}}`, `{"`+long+`":1}`)
	require.NoError(t, err)
	assert.GreaterOrEqual(t, n, len(long)/bytesPerStep)

	// uniqueItems compares up to 20 elements pair by pair: 20 arrays
	// differing in their last number took 32 s, of 1e1000 127 s and 58 GB.
	var arrays []string
	for i := range 20 {
		arrays = append(arrays, "["+strings.Repeat("1e1000,", 20_000)+fmt.Sprint(i)+"]")
	}
	_, err = steps(t, `{"uniqueItems":true}`, "["+strings.Join(arrays, ",")+"]")
	require.ErrorIs(t, err, ErrInvalid)
	assert.ErrorContains(t, err, "an array of 20 elements whose comparison would take about")
	_, err = steps(t, `{"uniqueItems":true}`, `[[1,2],[2,1],["a"],{"a":1e3}]`)
	require.NoError(t, err, "a small array is checked")
	_, err = steps(t, `{"uniqueItems":true}`, `[[1,2],[1.0,2]]`)
	require.ErrorContains(t, err, "items at index 0 and 1 are equal")

	// Format regex parsed a string of any length: 7 MiB took 14.2 s and
	// 2 GB.
	regex := strings.Repeat("x*", 1<<20)
	a := allocated(func() { _, err = steps(t, `{"format":"regex"}`, `"`+regex+`"`) })
	require.ErrorContains(t, err, "is not valid 'regex'")
	assert.Less(t, a, uint64(64<<20), "allocated %d bytes", a)

	// Under draft-07 the library asserted content keywords, decoding a
	// string's content with none of a document's bounds: a number of a
	// million digits took 3.6 s and 2.3 GB. Content is an annotation.
	d7 := `{"$schema":"http://json-schema.org/draft-07/schema#","contentMediaType":"application/json","contentSchema":{"type":"integer"}}`
	a = allocated(func() { _, err = steps(t, d7, `"`+strings.Repeat("9", 1<<20)+`"`) })
	require.NoError(t, err)
	assert.Less(t, a, uint64(64<<20), "allocated %d bytes", a)
	_, err = steps(t, d7, `"not json"`)
	require.NoError(t, err, "content is not asserted")
}

// TestStepsCapped: a schema's cost counts subschemas a document may never
// reach, so a plugin could raise a validation's limit by adding them (a
// doubling recursion padded so ran past 20 s); the limit is at most
// maxSteps.
func TestStepsCapped(t *testing.T) {
	r := &run{cost: MaxSchemaCost}
	r.start(context.Background(), []any{strings.Repeat("x", 64<<20)})
	r.steps = baseSteps
	func() {
		defer func() { recover() }()
		r.tick(nil, 0)
	}()
	assert.Equal(t, maxSteps, r.limit)
}

// TestCyclicValue: ValidateValue takes Go values, and one may contain
// itself; the walks that count a document stop past any decoded depth
// instead of overflowing the stack, which killed the process.
func TestCyclicValue(t *testing.T) {
	s, err := Compile(json.RawMessage(`{"type":"object"}`), "cyclic")
	require.NoError(t, err)
	m := map[string]any{}
	m["a"] = m
	require.ErrorIs(t, s.ValidateValue(m), ErrTooCostly)
	l := []any{nil}
	l[0] = l
	u, err := Compile(json.RawMessage(`{"uniqueItems":true}`), "cyclic")
	require.NoError(t, err)
	require.ErrorIs(t, u.ValidateValue([]any{l, l}), ErrInvalid)
}

// TestLocalNestsFromTheRoot: one edit's check nests from where the whole
// document puts the edited value, so that it passes if and only if the
// whole document's check does: a value 100 levels deep inserted 100
// levels down was accepted, and the next whole check refused the state.
func TestLocalNestsFromTheRoot(t *testing.T) {
	s, err := Compile(json.RawMessage(`{"$defs":{"n":{"type":"object","additionalProperties":{"$ref":"#/$defs/n"}}},"$ref":"#/$defs/n"}`), "tree")
	require.NoError(t, err)
	nested := func(n int) string { return strings.Repeat(`{"a":`, n) + "{}" + strings.Repeat("}", n) }
	var path []Step
	for range 100 {
		path = append(path, Step{Token: "a"})
	}
	for _, n := range []int{10, 100} {
		l, ok := s.Local(Edit{Path: path, Key: "b", Kind: Insert})
		require.True(t, ok)
		v, err := Decode([]byte(nested(n)), "")
		require.NoError(t, err)
		local := l.ValidateDecoded(v, "/a/b")
		// The whole document: 100 levels, then b holding the value.
		whole := s.Validate(json.RawMessage(strings.Repeat(`{"a":`, 100) + `{"b":` + nested(n) + "}" + strings.Repeat("}", 100)))
		assert.Equal(t, whole == nil, local == nil, "%d levels: whole %v, local %v", n, whole, local)
		if n == 100 {
			require.ErrorIs(t, local, ErrTooCostly)
		}
	}
}
