//go:build linux

package wasmrt

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/host/internal/loader"
)

// TestSectionsRecord: what KeepSections records is what Sections returns,
// names of any bytes included; a record damaged, of another module, of
// another version of the checks, or that another user may write, is not
// trusted.
func TestSectionsRecord(t *testing.T) {
	sum := sha256.Sum256([]byte("a module"))
	want := &loader.Sections{
		Exports: []string{"wasmhist_abi_v1", "describe", "", "\xff\n name"},
		Imports: []loader.Import{{Module: "extism:host/env", Name: "alloc", Kind: "func"}, {Module: "env", Name: "m", Kind: "memory"}},
	}
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, c *Cache)
		ok     bool
	}{
		{"intact", func(*testing.T, *Cache) {}, true},
		{"a byte changed", func(t *testing.T, c *Cache) { overwrite(t, c.sectionsPath(sum), 40, []byte{'X'}) }, false},
		{"cut short", func(t *testing.T, c *Cache) { require.NoError(t, os.Truncate(c.sectionsPath(sum), 30)) }, false},
		{"writable by others", func(t *testing.T, c *Cache) { require.NoError(t, os.Chmod(c.sectionsPath(sum), 0o666)) }, false},
		{"another module's, renamed", func(t *testing.T, c *Cache) {
			other := sha256.Sum256([]byte("another module"))
			c.KeepSections(other, want)
			require.NoError(t, os.Rename(c.sectionsPath(other), c.sectionsPath(sum)))
		}, false},
		{"counts past the record, with a good checksum", func(t *testing.T, c *Cache) {
			b := append([]byte(sectionsMagic), sum[:]...)
			b = binary.AppendUvarint(b, 1<<40)
			b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, castagnoli))
			require.NoError(t, writeAtomic(c.sectionsPath(sum), b))
		}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewCache(t.TempDir())
			require.NoError(t, err)
			t.Cleanup(func() { c.Close(context.Background()) })
			_, ok := c.Sections(sum)
			require.False(t, ok, "no record yet")
			c.KeepSections(sum, want)
			tc.change(t, c)
			got, ok := c.Sections(sum)
			require.Equal(t, tc.ok, ok)
			if tc.ok {
				require.Equal(t, want, got)
			}
		})
	}
}
