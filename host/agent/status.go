package agent

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/wasmhist/wasmhist/host/internal/hosterr"
	"github.com/wasmhist/wasmhist/host/internal/txn"
	"github.com/wasmhist/wasmhist/host/session"
	"github.com/wasmhist/wasmhist/host/store"
)

// ModelError is a run's model call that failed: which call of the run it
// was, and the model client's error, which it wraps.
type ModelError struct {
	Call int // 1 for the run's first model call
	Err  error
}

func (e *ModelError) Error() string {
	return fmt.Sprintf("agent: run: model call %d: %v", e.Call, e.Err)
}

func (e *ModelError) Unwrap() error { return e.Err }

// HTTPStatus is the HTTP status a service answers a turn or a history read
// that failed with err, by what the error says:
//
//   - 400 Bad Request: a session id the store cannot hold
//     (store.ErrInvalidID);
//   - 409 Conflict: another writer committed first and the retries ran
//     out (session.ErrStaleRevision), or tool calls await approval
//     (ErrApprovalRequired);
//   - 422 Unprocessable Content: a run id used before with other input
//     (ErrRunIDReused), as for an Idempotency-Key reused with another
//     request;
//   - 503 Service Unavailable: a database stayed locked by another writer
//     (host.ErrBusy); the turn may be sent again;
//   - 504 Gateway Timeout: the turn's context ran out of time, or a plugin
//     call did (host.ErrTimeout);
//   - 502 Bad Gateway: the model service failed (ModelError);
//   - 500 Internal Server Error: anything else, a plugin's failure among
//     them; 200 OK for nil.
//
// The first that matches wins, in this order: a model call that timed out
// is 504.
func HTTPStatus(err error) int {
	switch {
	case err == nil:
		return http.StatusOK
	case errors.Is(err, store.ErrInvalidID):
		return http.StatusBadRequest
	case errors.Is(err, session.ErrStaleRevision), errors.Is(err, ErrApprovalRequired):
		return http.StatusConflict
	case errors.Is(err, ErrRunIDReused):
		return http.StatusUnprocessableEntity
	case errors.Is(err, txn.ErrBusy):
		return http.StatusServiceUnavailable
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, hosterr.ErrTimeout):
		return http.StatusGatewayTimeout
	}
	var me *ModelError
	if errors.As(err, &me) {
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}
