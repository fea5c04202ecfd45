package wasmrt

import (
	"context"
	"crypto/sha256"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

const testPages = 512

func cacheDir(t testing.TB) string {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	return CacheDir(filepath.Join(base, "wasmhist", "compile"))
}

func compileHostile(t *testing.T, name string) *Module {
	t.Helper()
	ctx := context.Background()
	path := sdktest.BuildPlugin(t, "../../testdata/hostile/"+name)
	wasm, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Compile(ctx, cacheDir(t), sha256.Sum256(wasm), wasm, testPages)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Release(ctx) })
	return m
}

func TestCallFailures(t *testing.T) {
	m := compileHostile(t, "misbehave")
	tests := []struct {
		name string
		word string
		want error
	}{
		{"loop", "loop", hosterr.ErrTimeout},
		{"hog", "hog", hosterr.ErrMemoryLimit},
		{"panic", "panic", hosterr.ErrTrap},
		{"plugin error", "error", abi.ErrNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			// A small limit keeps the hog's work short.
			in, err := m.NewInstance(ctx, 128)
			if err != nil {
				t.Fatal(err)
			}
			defer in.Close(ctx)
			if _, err := in.Call(ctx, abi.ExportDescribe, nil); err != nil {
				t.Fatalf("describe: %v", err)
			}
			// Only the spinning case needs a short deadline; the others get
			// room so that a loaded machine cannot turn them into timeouts.
			d := 5 * time.Second
			if tt.want == hosterr.ErrTimeout {
				d = 300 * time.Millisecond
			}
			cctx, cancel := context.WithTimeout(ctx, d)
			defer cancel()
			_, err = in.Call(cctx, abi.ExportProvide, []byte(`{"x":"hostile:`+tt.word+`"}`))
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			t.Logf("%v (memory %d)", err, in.MemoryBytes())
		})
	}
}

// TestGuestEntropyAndClock checks that instances draw real randomness and
// see the real time: wazero's defaults (a fixed seed, a fake clock) would
// give every instance of a plugin the same "random" session keys.
func TestGuestEntropyAndClock(t *testing.T) {
	m := compileHostile(t, "misbehave")
	ctx := context.Background()
	seen := map[string]bool{}
	for range 2 {
		in, err := m.NewInstance(ctx, testPages)
		if err != nil {
			t.Fatal(err)
		}
		_, err = in.Call(ctx, "provide", []byte(`{"request_messages":["hostile:entropy"]}`))
		in.Close(ctx)
		var pe *abi.Error
		if !errors.As(err, &pe) {
			t.Fatalf("want the plugin's report as an error, got %v", err)
		}
		random, unix, ok := strings.Cut(pe.Message, " ")
		if !ok {
			t.Fatalf("unexpected report %q", pe.Message)
		}
		if seen[random] {
			t.Fatalf("two instances drew the same random bytes %s", random)
		}
		seen[random] = true
		sec, err := strconv.ParseInt(unix, 10, 64)
		if err != nil || time.Since(time.Unix(sec, 0)).Abs() > time.Hour {
			t.Fatalf("guest clock says %s, host says %d", unix, time.Now().Unix())
		}
	}
}
