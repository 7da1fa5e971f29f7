package server

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is an error with the HTTP status it should produce. Handlers return
// one to answer with a status other than 500.
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

// BadRequest builds a 400 *Error.
func BadRequest(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, format, args...)
}

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail describes one failed request.
type ErrorDetail struct {
	// Type is a short machine-readable class: bad_request,
	// payload_too_large, internal_error, or the status text.
	Type string `json:"type"`
	// Message says what went wrong.
	Message string `json:"message"`
}

// StatusError is returned by Client when the peer answered with a status
// outside 2xx.
type StatusError struct {
	Status int
	// Body is the peer's error message when it sent an ErrorBody, else the
	// start of its raw body.
	Body string
}

func (e *StatusError) Error() string {
	return fmt.Sprintf("peer answered %d %s: %s", e.Status, http.StatusText(e.Status), e.Body)
}

// StatusOf returns the HTTP status carried by err (an *Error or a
// *StatusError), or 0.
func StatusOf(err error) int {
	if err == nil {
		return 0 // without errors.As, whose target would escape and allocate
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Status
	}
	var s *StatusError
	if errors.As(err, &s) {
		return s.Status
	}
	return 0
}

func errorType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "bad_request"
	case http.StatusRequestEntityTooLarge:
		return "payload_too_large"
	case http.StatusInternalServerError:
		return "internal_error"
	}
	return http.StatusText(status)
}
