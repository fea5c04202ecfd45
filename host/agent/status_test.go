package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wasmhist/wasmhist/abi"
	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"
)

// TestHTTPStatus: each error a turn can fail with, wrapped as the agent
// and the stores wrap them, answers its documented status, and the first
// match wins (a model call that timed out is a timeout, not the model's
// failure).
func TestHTTPStatus(t *testing.T) {
	wrap := func(err error) error { return fmt.Errorf("agent: session %q: %w", "s", err) }
	for _, tt := range []struct {
		err  error
		want int
	}{
		{nil, http.StatusOK},
		{wrap(store.ErrInvalidID), http.StatusBadRequest},
		{wrap(session.ErrStaleRevision), http.StatusConflict},
		{wrap(ErrApprovalRequired), http.StatusConflict},
		{wrap(ErrRunIDReused), http.StatusUnprocessableEntity},
		{wrap(txn.ErrBusy), http.StatusServiceUnavailable},
		{wrap(context.DeadlineExceeded), http.StatusGatewayTimeout},
		{wrap(hosterr.ErrTimeout), http.StatusGatewayTimeout},
		{&ModelError{Call: 2, Err: errServiceDown}, http.StatusBadGateway},
		{&ModelError{Call: 1, Err: context.DeadlineExceeded}, http.StatusGatewayTimeout},
		{wrap(hosterr.ErrTrap), http.StatusInternalServerError},
		{errors.New("anything else"), http.StatusInternalServerError},
	} {
		assert.Equal(t, tt.want, HTTPStatus(tt.err), "%v", tt.err)
	}
}

// TestTurnErrorsCarryTheirStatus: through Sessions, a session id the store
// cannot hold is 400 and a model service that fails is 502, whose error
// still reads as it did ("agent: run: model call 1: ...").
func TestTurnErrorsCarryTheirStatus(t *testing.T) {
	ctx := context.Background()
	st, err := store.NewDir(filepath.Join(t.TempDir(), "sessions"))
	require.NoError(t, err)
	svc := &fakeService{failAt: 1}
	ss, err := NewSessions(Config{Model: svc.client(), Providers: []ProviderConfig{{Provider: NewMemoryProvider("history")}}, Saver: st})
	require.NoError(t, err)
	in := []abi.Message{abi.NewMessage(abi.RoleUser, "hi")}

	_, err = ss.Run(ctx, `a\b`, in, nil)
	require.ErrorIs(t, err, store.ErrInvalidID)
	assert.Equal(t, http.StatusBadRequest, HTTPStatus(err))

	_, err = ss.Run(ctx, "ann", in, nil)
	require.ErrorIs(t, err, errServiceDown)
	var me *ModelError
	require.ErrorAs(t, err, &me)
	assert.Equal(t, 1, me.Call)
	assert.Contains(t, err.Error(), "agent: run: model call 1: fake service: unavailable")
	assert.Equal(t, http.StatusBadGateway, HTTPStatus(err))
}
