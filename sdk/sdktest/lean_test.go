package sdktest

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// errorsOf is a testing.TB that records the failures it is given.
type errorsOf struct {
	testing.TB
	errs []string
}

func (e *errorsOf) Errorf(format string, args ...any) {
	e.errs = append(e.errs, fmt.Sprintf(format, args...))
}

// TestCheckLeanFailsOnce: a plugin that links fmt and encoding/json from
// several functions fails the lean check once, in one line that names
// where each path enters them and what to do.
func TestCheckLeanFailsOnce(t *testing.T) {
	rec := &errorsOf{TB: t}
	CheckLean(rec, "./testdata/fat")
	require.Len(t, rec.errs, 1, "one failure for the plugin")
	msg := rec.errs[0]
	assert.NotContains(t, msg, "\n", "one line")
	assert.Contains(t, msg, "sdktest: the plugin ./testdata/fat links ")
	for _, want := range []string{"fmt.Sprintf (from main.provider.Describe)", "fmt.errorf (from main.provider.Provide)", "encoding/json.Unmarshal (from main.provider.Store)"} {
		assert.Contains(t, msg, want)
	}
	assert.NotContains(t, msg, "type:", "a path inside fmt is not where it enters")
	assert.True(t, strings.HasSuffix(msg, "build errors with errors.New or concatenation and read JSON without encoding/json"), msg)
}
