package schema

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/schemas"
)

// TestSessionDigestsCheckedByHand: no digest pattern of session.json is
// left to package regexp once the schema is compiled.
func TestSessionDigestsCheckedByHand(t *testing.T) {
	var left []string
	hand := 0
	walkSchemas(Project(schemas.Session).s, func(s *jsonschema.Schema) bool {
		if s.Pattern != nil {
			if _, ok := handPatterns[s.Pattern.String()]; ok {
				left = append(left, s.Location)
			}
		}
		if _, ok := s.Extensions["pattern"].(handPattern); ok {
			hand++
		}
		return true
	})
	assert.Empty(t, left, "digest patterns still matched by package regexp")
	assert.Equal(t, 3, hand, "session.json has three digest patterns")
}

// libraryOnly compiles a project schema as the library alone compiles it,
// every pattern a regular expression.
func libraryOnly(t *testing.T, name string) *Schema {
	t.Helper()
	s, err := newCompiler().Compile(schemas.ID(name))
	require.NoError(t, err)
	return &Schema{name: name, s: s, local: localSound(s)}
}

// TestHandPatternsFailAsTheLibrary: a session with a digest that is
// wrong, alone or beside other failures, is refused with the very error
// the library's own pattern keyword gives.
func TestHandPatternsFailAsTheLibrary(t *testing.T) {
	hex := strings.Repeat("0123456789abcdef", 4)
	session := func(plugin, input, compaction string) string {
		return `{"schema_version":1,"session_id":"s","revision":3,` +
			`"provenance":{"history":{"plugin":"sqlite","sha256":` + plugin + `}},` +
			`"recent_runs":[{"run_id":"r","input_sha256":` + input + `,"revision":3}],` +
			`"compactions":{"history":{"covers":2,"sha256":` + compaction + `,"summary":"s"}}}`
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	tests := []struct {
		name  string
		doc   string
		valid bool
	}{
		{"all valid", session(q(hex), q(hex), q(hex)), true},
		{"empty input digest", session(q(hex), `""`, q(hex)), true},
		{"empty plugin digest", session(`""`, q(hex), q(hex)), false},
		{"upper case", session(q(strings.ToUpper(hex)), q(hex), q(hex)), false},
		{"63 digits", session(q(hex[:63]), q(hex), q(hex)), false},
		{"65 digits", session(q(hex), q(hex+"0"), q(hex)), false},
		{"trailing newline", session(q(hex), q(hex), q(hex+"\n")), false},
		{"non-ASCII", session(q(hex[:62]+"é"), q(hex), q(hex)), false},
		{"number", session(q(hex), `5`, q(hex)), false},
		{"all wrong", session(q("x"), q("y"), q("z")), false},
		{"wrong beside another failure", strings.Replace(session(q("x"), q(hex), q(hex)), `"covers":2`, `"covers":0`, 1), false},
	}
	lib := libraryOnly(t, schemas.Session)
	hand := Project(schemas.Session)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			want := lib.Validate(json.RawMessage(tt.doc))
			got := hand.Validate(json.RawMessage(tt.doc))
			if tt.valid {
				require.NoError(t, want)
				require.NoError(t, got)
				return
			}
			require.Error(t, want)
			require.ErrorIs(t, got, ErrInvalid)
			assert.Equal(t, want.Error(), got.Error())
		})
	}
}

func FuzzHandPatterns(f *testing.F) {
	hex := strings.Repeat("0123456789abcdef", 4)
	for _, s := range []string{"", hex, hex[:63], hex + "0", strings.ToUpper(hex), hex[:63] + "g", hex + "\n", "\xff"} {
		f.Add(s)
	}
	res := map[string]*regexp.Regexp{}
	for p := range handPatterns {
		res[p] = regexp.MustCompile(p)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for p, match := range handPatterns {
			if got, want := match(s), res[p].MatchString(s); got != want {
				t.Fatalf("%s: hand check of %q = %v, the regular expression says %v", p, s, got, want)
			}
		}
	})
}
