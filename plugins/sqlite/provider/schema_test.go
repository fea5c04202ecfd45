package provider

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestInsertRows pins the VALUES list insertRows builds: parameters
// numbered from ?2, five a row, the first row's count cast to an integer,
// for the precomputed sizes and beyond them.
func TestInsertRows(t *testing.T) {
	for _, tc := range []struct {
		name   string
		n      int
		values string
	}{
		{"one row", 1, "(CAST(?2 AS INTEGER), ?3, ?4, ?5, ?6)"},
		{"three rows", 3, "(CAST(?2 AS INTEGER), ?3, ?4, ?5, ?6), (?7, ?8, ?9, ?10, ?11), (?12, ?13, ?14, ?15, ?16)"},
		{"past the precomputed", len(insertSQL) + 1, "(CAST(?2 AS INTEGER), ?3, ?4, ?5, ?6), (?7, ?8, ?9, ?10, ?11), (?12, ?13, ?14, ?15, ?16), " +
			"(?17, ?18, ?19, ?20, ?21), (?22, ?23, ?24, ?25, ?26), (?27, ?28, ?29, ?30, ?31), (?32, ?33, ?34, ?35, ?36), " +
			"(?37, ?38, ?39, ?40, ?41), (?42, ?43, ?44, ?45, ?46)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, strings.Replace(insertMessages, "%s", tc.values, 1), insertRows(tc.n))
		})
	}
}

// TestRoleArg: a role of ABI section 6 becomes a statement argument
// without an allocation (each costs a WebAssembly guest thousands of
// instructions), as the same string; another role is passed as it is.
func TestRoleArg(t *testing.T) {
	for _, role := range []string{"user", "assistant", "system", "tool", "narrator"} {
		t.Run(role, func(t *testing.T) {
			decoded := string([]byte(role)) // as the store request's decoder gives it
			var arg any
			allocs := testing.AllocsPerRun(100, func() { arg = roleArg(decoded) })
			assert.Equal(t, any(role), arg)
			if role == "narrator" {
				return
			}
			assert.Zero(t, allocs)
		})
	}
}
