package server

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/gymlens/gymlens/protocol"
)

// Error is an error with the HTTP status it should produce, answered as
// FastAPI answers a raised HTTPException: {"detail": Message}. Handlers
// return one to answer with a status other than 500.
type Error struct {
	Status  int
	Message string
}

func (e *Error) Error() string {
	return fmt.Sprintf("%d %s: %s", e.Status, http.StatusText(e.Status), e.Message)
}

// Errorf builds an *Error with the given status.
func Errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// StatusError is returned by Client when the peer answered with a status
// outside 2xx.
type StatusError struct {
	Status int
	// Body is what the peer said: the detail of a {"detail": ...} body
	// (validation failures summarised), the text of a JSON string body
	// (upstream's 500s), else the start of the raw body.
	Body string
	// Raw is the start of the raw body (at most 4 KiB).
	Raw []byte
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("peer answered %d %s: %s", e.Status, http.StatusText(e.Status), e.Body)
}

// StatusOf returns the HTTP status carried by err (an *Error, a
// *protocol.ValidationError or a *StatusError), or 0.
func StatusOf(err error) int {
	if err == nil {
		return 0 // without errors.As, whose target would escape and allocate
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	var v *protocol.ValidationError
	if errors.As(err, &v) {
		return http.StatusUnprocessableEntity
	}
	var s *StatusError
	if errors.As(err, &s) {
		return s.Status
	}
	return 0
}

// errorBody returns the status and JSON body that answer err, in the
// shapes upstream's servers use: 422 with a pydantic detail list for a
// request that fails validation, {"detail": msg} for an *Error, and a
// JSON string for any other failure (upstream answers an uncaught
// exception with its repr as a JSON string, status 500).
func errorBody(err error) (int, []byte) {
	var v *protocol.ValidationError
	var e *Error
	var body []byte
	status := http.StatusInternalServerError
	switch {
	case errors.As(err, &v):
		status = http.StatusUnprocessableEntity
		body, _ = json.Marshal(v)
	case errors.As(err, &e):
		status = e.Status
		body, _ = json.Marshal(protocol.DetailBody{Detail: e.Message})
	case err != nil:
		body, _ = json.Marshal(err.Error())
	default:
		body = []byte(`"An unknown error occurred"`)
	}
	return status, body
}

// peerMessage reads what an error body says, for StatusError.Body.
func peerMessage(raw []byte) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var d struct {
		Detail json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(raw, &d) == nil && len(d.Detail) > 0 {
		if json.Unmarshal(d.Detail, &s) == nil {
			return s
		}
		var list []protocol.FieldError
		if json.Unmarshal(d.Detail, &list) == nil {
			return (&protocol.ValidationError{Detail: list}).Error()
		}
	}
	return string(raw)
}
