// Command onlyhost is a program that embeds the host and grants no
// capability; TestLinksOnlyWhatItImports lists what it links.
package main

import (
	"context"

	"github.com/wasmhist/wasmhist/host"
)

func main() {
	h, err := host.New(context.Background(), host.Config{})
	if err != nil {
		panic(err)
	}
	h.Close(context.Background())
}
