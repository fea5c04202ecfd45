//go:build linux

package wasmrt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
)

// entryOf lays code out as wazero v1.9.0 keeps a compiled module in its
// cache (wazevo engine_cache.go serializeCompiledModule): three functions,
// no source map.
func entryOf(code []byte) []byte {
	b := []byte("WAZEVO")
	b = append(b, byte(len("v1.9.0")))
	b = append(b, "v1.9.0"...)
	b = binary.LittleEndian.AppendUint32(b, 3)
	for _, off := range []uint64{0, 16, 64} {
		b = binary.LittleEndian.AppendUint64(b, off)
	}
	b = binary.LittleEndian.AppendUint64(b, uint64(len(code)))
	b = append(b, code...)
	b = binary.LittleEndian.AppendUint32(b, crc32.Checksum(code, castagnoli))
	return append(b, 0)
}

// codeCache is a cache holding the entry of some code in a directory of
// wazero entries, and that code.
type codeCache struct {
	c     *Cache
	dir   string // wazero's entries
	key   [32]byte
	code  []byte
	entry []byte
}

func newCodeCache(t *testing.T) *codeCache {
	t.Helper()
	c, err := NewCache(t.TempDir())
	require.NoError(t, err)
	t.Cleanup(func() { c.Close(context.Background()) })
	rng := rand.NewChaCha8([32]byte{1})
	code := make([]byte, minMappedCode+12345)
	rng.Read(code)
	cc := &codeCache{c: c, dir: filepath.Join(c.dir, "wazero-test"), key: sha256.Sum256(code), code: code, entry: entryOf(code)}
	require.NoError(t, os.Mkdir(cc.dir, 0o700))
	require.NoError(t, writeAtomic(filepath.Join(cc.dir, hex.EncodeToString(cc.key[:])), cc.entry))
	return cc
}

// load reads the entry as wazero does, into a fresh anonymous mapping,
// and then maps it as mapCode does. It returns the code as loaded and
// whether it was mapped from the text file while read (the record held).
func (cc *codeCache) load(t *testing.T) (code []byte, throughRecord bool) {
	t.Helper()
	files := &codeFiles{c: cc.c, path: filepath.Join(cc.dir, hex.EncodeToString(cc.key[:])), name: hex.EncodeToString(cc.key[:])}
	r, ok, err := files.Get(cc.key)
	require.NoError(t, err)
	require.True(t, ok)
	defer r.Close()
	all, err := io.ReadAll(io.LimitReader(r, int64(len(cc.entry)-len(cc.code)-5)))
	require.NoError(t, err)
	require.Equal(t, cc.entry[:len(all)], all)
	code, err = syscall.Mmap(-1, 0, len(cc.code), syscall.PROT_READ|syscall.PROT_WRITE|syscall.PROT_EXEC, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	require.NoError(t, err)
	t.Cleanup(func() { syscall.Munmap(code) })
	_, err = io.ReadFull(r, code)
	require.NoError(t, err)
	tail, err := io.ReadAll(r)
	require.NoError(t, err)
	require.Equal(t, cc.entry[len(cc.entry)-5:], tail)
	read := files.entry()
	require.True(t, read.of(code), "the load noted where the code went")
	throughRecord = read.mapped
	require.Equal(t, len(code), cc.c.mapExecutable(code, read))
	require.Contains(t, mappedFile(t, unsafe.Pointer(&code[0])), "/text/", "the code is the cache's copy")
	return code, throughRecord
}

// passTick waits until the file system's clock is past the change time of
// the file at path: a change made after it gets a later change time.
func passTick(t *testing.T, path string) {
	t.Helper()
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(path, &st))
	for fsClock() <= st.Ctim.Nano() {
		runtime.Gosched()
	}
}

// TestCodeRecord: a warm load maps the code from the text file a record
// names instead of reading it, once a load compared the two and the file
// had not changed in the clock tick the comparison started in.
func TestCodeRecord(t *testing.T) {
	cc := newCodeCache(t)
	code, through := cc.load(t) // writes the text file
	require.False(t, through)
	require.Equal(t, cc.code, code)
	text := cc.c.textPath(cc.code)
	passTick(t, text)
	code, through = cc.load(t) // compares it, and records it
	require.False(t, through)
	require.Equal(t, cc.code, code)
	require.FileExists(t, cc.c.recordPath(hex.EncodeToString(cc.key[:])))
	code, through = cc.load(t)
	require.True(t, through, "the code was read although a record names its text file")
	require.Equal(t, cc.code, code)
}

// TestCodeRecordRacy: a text file changed in the clock tick a comparison
// started in is not recorded (a change after the comparison in that same
// tick would keep its stat identity).
func TestCodeRecordRacy(t *testing.T) {
	cc := newCodeCache(t)
	cc.load(t)
	text := cc.c.textPath(cc.code)
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(text, &st))
	clock := fsClock
	defer func() { fsClock = clock }()
	fsClock = func() int64 { return st.Ctim.Nano() } // the load starts in the tick the file changed in
	cc.load(t)
	require.NoFileExists(t, cc.c.recordPath(hex.EncodeToString(cc.key[:])))
}

// TestCodeRecordRefused: once a record is written, a text file or record
// changed behind the cache's back is never mapped as the module's code;
// the load reads the code from wazero's entry.
func TestCodeRecordRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(t *testing.T, cc *codeCache, text, record string)
	}{{
		// The same size, modification time and CRC-32C (the one wazero
		// checks): only the change time says it changed.
		name: "text changed in place",
		change: func(t *testing.T, cc *codeCache, text, _ string) {
			info, err := os.Stat(text)
			require.NoError(t, err)
			f, err := os.OpenFile(text, os.O_WRONLY, 0)
			require.NoError(t, err)
			_, err = f.WriteAt(sameCRC(cc.code), 0)
			require.NoError(t, err)
			require.NoError(t, f.Close())
			require.NoError(t, os.Chtimes(text, info.ModTime(), info.ModTime()))
		},
	}, {
		name: "text replaced",
		change: func(t *testing.T, cc *codeCache, text, _ string) {
			info, err := os.Stat(text)
			require.NoError(t, err)
			other := text + ".other"
			require.NoError(t, os.WriteFile(other, sameCRC(cc.code), 0o600))
			require.NoError(t, os.Chtimes(other, info.ModTime(), info.ModTime()))
			require.NoError(t, os.Rename(other, text))
		},
	}, {
		// A record another user may write is refused, as is a text file
		// another user may write.
		name: "record writable by others",
		change: func(t *testing.T, cc *codeCache, text, record string) {
			forgeText(t, cc, text, func() {})
			require.NoError(t, os.Chmod(record, 0o666))
		},
	}, {
		name: "text writable by others",
		change: func(t *testing.T, cc *codeCache, text, record string) {
			forgeText(t, cc, text, func() { require.NoError(t, os.Chmod(text, 0o666)) })
		},
	}, {
		name: "record naming a file outside the cache",
		change: func(t *testing.T, cc *codeCache, text, record string) {
			forgeText(t, cc, text, func() {})
			b, err := os.ReadFile(record)
			require.NoError(t, err)
			name := filepath.Base(text)
			require.NoError(t, os.WriteFile(record, bytes.Replace(b, []byte(name), []byte("../text/"+name), 1), 0o600))
		},
	}, {
		name: "entry of other code",
		change: func(t *testing.T, cc *codeCache, text, _ string) {
			cc.code = bytes.Clone(cc.code)
			cc.code[100] ^= 1
			cc.entry = entryOf(cc.code)
			require.NoError(t, writeAtomic(filepath.Join(cc.dir, hex.EncodeToString(cc.key[:])), cc.entry))
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cc := newCodeCache(t)
			cc.load(t)
			text, record := cc.c.textPath(cc.code), cc.c.recordPath(hex.EncodeToString(cc.key[:]))
			passTick(t, text)
			cc.load(t)
			require.FileExists(t, record)
			tc.change(t, cc, text, record)
			want := bytes.Clone(cc.code)
			code, through := cc.load(t)
			require.False(t, through, "the code was mapped through a record that no longer holds")
			require.Equal(t, want, code)
		})
	}
}

// forgeText changes the text file in place to other bytes with the same
// CRC-32C, then calls then, and forges the record to name the file as it
// now is: what another user could do if the cache let them write.
func forgeText(t *testing.T, cc *codeCache, text string, then func()) {
	t.Helper()
	f, err := os.OpenFile(text, os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteAt(sameCRC(cc.code), 0)
	require.NoError(t, err)
	require.NoError(t, f.Close())
	then()
	var st syscall.Stat_t
	require.NoError(t, syscall.Stat(text, &st))
	id := identity{dev: st.Dev, ino: st.Ino, size: st.Size, mtime: st.Mtim.Nano(), ctime: st.Ctim.Nano()}
	require.NoError(t, writeAtomic(cc.c.recordPath(hex.EncodeToString(cc.key[:])),
		[]byte(fmtRecord(filepath.Base(text), id, len(cc.code), crc32.Checksum(cc.code, castagnoli)))))
}

// sameCRC returns other bytes than code with the same length and CRC-32C:
// the first byte flipped, and four bytes after it chosen to restore the
// checksum (a CRC is linear: the change's own CRC, over zeros of the same
// length, must be zero).
func sameCRC(code []byte) []byte {
	out := bytes.Clone(code)
	out[0] ^= 0xff
	want := crc32.Checksum(code, castagnoli)
	// Search the four bytes at offset 1..4 bit by bit: each bit of them
	// flips a fixed pattern of the checksum, and 32 independent patterns
	// reach any difference.
	basis := make([]uint32, 32)
	base := crc32.Checksum(out, castagnoli)
	for bit := range 32 {
		b := bytes.Clone(out)
		b[1+bit/8] ^= 1 << (bit % 8)
		basis[bit] = crc32.Checksum(b, castagnoli) ^ base
	}
	// Gaussian elimination over GF(2).
	diff := base ^ want
	rows := make([]uint64, 32) // low 32 bits: pattern; high 32: which bits
	for i := range 32 {
		rows[i] = uint64(basis[i]) | 1<<(32+i)
	}
	var chosen uint64
	for col := 31; col >= 0; col-- {
		p := -1
		for i := range rows {
			if rows[i]&(1<<col) != 0 {
				p = i
				break
			}
		}
		if p < 0 {
			continue
		}
		pivot := rows[p]
		rows = append(rows[:p], rows[p+1:]...)
		for i := range rows {
			if rows[i]&(1<<col) != 0 {
				rows[i] ^= pivot
			}
		}
		if diff&(1<<col) != 0 {
			diff ^= uint32(pivot)
			chosen ^= pivot >> 32
		}
	}
	for bit := range 32 {
		if chosen&(1<<bit) != 0 {
			out[1+bit/8] ^= 1 << (bit % 8)
		}
	}
	if crc32.Checksum(out, castagnoli) != want || bytes.Equal(out, code) {
		panic("sameCRC found no collision")
	}
	return out
}

// TestPluginCodeThroughRecord: warm loads of a Go plugin from caches of
// their own on one directory, as processes would, map its code through
// the record, and run it.
func TestPluginCodeThroughRecord(t *testing.T) {
	ctx := context.Background()
	wasm := pluginWasm(t)
	dir := t.TempDir()
	load := func() {
		c, err := NewCache(dir)
		require.NoError(t, err)
		defer c.Close(ctx)
		e := NewEngine(c, nil)
		e.interpretFirst = false
		defer e.Close(ctx)
		m, err := e.Compile(ctx, sha256.Sum256(wasm), wasm, testPages)
		require.NoError(t, err)
		code, _ := executableOf(m.code().module)
		require.NotEmpty(t, code)
		require.Contains(t, mappedFile(t, unsafe.Pointer(&code[0])), "/text/", "the code is the cache's copy")
		in, err := m.NewInstance(ctx, testPages)
		require.NoError(t, err)
		_, err = in.Call(ctx, "describe", nil)
		require.NoError(t, err)
		require.NoError(t, in.Close(ctx))
		m.Release(ctx)
	}
	load() // compiles
	records := func() []string {
		m, err := filepath.Glob(filepath.Join(dir, "text", "*.map"))
		require.NoError(t, err)
		return m
	}
	texts, err := filepath.Glob(filepath.Join(dir, "text", "*.bin"))
	require.NoError(t, err)
	require.NotEmpty(t, texts)
	for _, p := range texts {
		passTick(t, p)
	}
	for range 3 {
		load()
	}
	require.NotEmpty(t, records(), "no load recorded its code")
}
