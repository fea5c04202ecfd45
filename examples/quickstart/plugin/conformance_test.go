package main

import (
	"context"
	"testing"

	"github.com/wasmhist/wasmhist/host"
	"github.com/wasmhist/wasmhist/sdk"
	"github.com/wasmhist/wasmhist/sdk/sdktest"
)

// TestConformance runs the conformance suite on the provider's Go code.
func TestConformance(t *testing.T) {
	h, err := host.New(t.Context(), host.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close(context.Background()) })
	sdktest.Run(t, func(ctx context.Context) (sdktest.Subject, error) {
		return h.LoadNative(ctx, "recent", sdk.Handler(provider{}), host.LoadOptions{})
	})
}
