package sqlcap

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestMayAlterAgreesWithEqualFold: mayAlter finds "alter" in any case
// wherever strings.EqualFold on a 5-byte window does, non-ASCII text and
// the letters next to those of "alter" in ASCII included.
func TestMayAlterAgreesWithEqualFold(t *testing.T) {
	equalFold := func(sql string) bool {
		for i := 0; i+5 <= len(sql); i++ {
			if strings.EqualFold(sql[i:i+5], "alter") {
				return true
			}
		}
		return false
	}
	for _, sql := range []string{
		"ALTER TABLE t RENAME TO u", "alter table t", "SELECT 1; aLtEr TABLE x", "xalterx",
		"SELECT * FROM t", "", "alte", "ALTE", "altér", "@LTER", "a\u212atlter", "ALTE\u0280",
		"SELECT 'ALTER'", "/* alter */ SELECT 1", "ａｌｔｅｒ", "alteR",
	} {
		assert.Equal(t, equalFold(sql), mayAlter(sql), "mayAlter(%q)", sql)
	}
	// Every byte value in every position of a 5-byte window.
	base := []byte("alter")
	for pos := range base {
		for c := 0; c < 256; c++ {
			b := append([]byte(nil), base...)
			b[pos] = byte(c)
			assert.Equal(t, equalFold(string(b)), mayAlter(string(b)), "mayAlter(%q)", b)
		}
	}
}
