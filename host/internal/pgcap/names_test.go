package pgcap

import (
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// The patterns the hand-written checks replace; the checks must accept
// exactly what these match.
var (
	schemaNamePattern = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,39}$`)
	tenantNamePattern = regexp.MustCompile(`^[a-z0-9_]{1,20}$`)
)

func TestNames(t *testing.T) {
	cases := []struct {
		name           string
		in             string
		schema, tenant bool
	}{
		{"empty", "", false, false},
		{"plain", "history", true, true},
		{"underscore first", "_h1", true, true},
		{"digit first", "1h", false, true},
		{"upper", "History", false, false},
		{"dash", "a-b", false, false},
		{"newline after", "abc\n", false, false},
		{"40 long", strings.Repeat("a", 40), true, false},
		{"41 long", strings.Repeat("a", 41), false, false},
		{"20 long", strings.Repeat("9", 20), false, true},
		{"21 long", strings.Repeat("a", 21), true, false},
		{"non-ASCII", "é", false, false},
		{"NUL", "a\x00", false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.schema, validSchemaName(c.in), "schema name")
			assert.Equal(t, c.tenant, validTenantName(c.in), "tenant name")
			assert.Equal(t, schemaNamePattern.MatchString(c.in), validSchemaName(c.in), "schema name against its pattern")
			assert.Equal(t, tenantNamePattern.MatchString(c.in), validTenantName(c.in), "tenant name against its pattern")
		})
	}
}

func FuzzNames(f *testing.F) {
	for _, s := range []string{"", "history", "_", "0", "a-b", "A", strings.Repeat("z", 40), strings.Repeat("_", 41), strings.Repeat("1", 20), strings.Repeat("1", 21), "\xff", "a\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validSchemaName(s), schemaNamePattern.MatchString(s); got != want {
			t.Fatalf("validSchemaName(%q) = %v, the pattern says %v", s, got, want)
		}
		if got, want := validTenantName(s), tenantNamePattern.MatchString(s); got != want {
			t.Fatalf("validTenantName(%q) = %v, the pattern says %v", s, got, want)
		}
	})
}
