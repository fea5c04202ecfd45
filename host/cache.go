package host

import (
	"context"
	"fmt"

	"github.com/wasmhist/wasmhist/host/internal/wasmrt"
)

// Cache holds compiled plugins for several Hosts: machine code in memory,
// shared by every Host whose Config.Cache it is, and on disk, shared across
// processes. Without one, each Host keeps a cache of its own in
// Config.CacheDir and frees it on Close.
//
// The embedder that creates a Cache closes it, after the Hosts using it.
type Cache struct {
	c *wasmrt.Cache
}

// NewCache opens a compilation cache in dir (created if missing; "" means
// the default of Config.CacheDir). The cache keeps a subdirectory per
// runtime version, so an upgraded host never loads code compiled by an
// older one.
func NewCache(dir string) (*Cache, error) {
	if dir == "" {
		dir = defaultCacheDir()
	}
	c, err := wasmrt.NewCache(wasmrt.CacheDir(dir))
	if err != nil {
		return nil, fmt.Errorf("host: new cache: %w", err)
	}
	return &Cache{c: c}, nil
}

// Close frees the compiled code the cache holds in memory; the files stay.
func (c *Cache) Close(ctx context.Context) error {
	return c.c.Close(ctx)
}
