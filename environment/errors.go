package environment

import "github.com/gymlens/gymlens/server"

// Error is an error that answers with a status of its own: a verify,
// seed or tool function (or a Sessions.Update function inside one) that
// returns one, directly or wrapped, answers Status with
// {"detail": Message}, as upstream's servers answer a raised FastAPI
// HTTPException. Any other error answers 500 with its message as a JSON
// string. It is the runtime's server.Error, named here so that an
// environment needs no other package of this module to use it.
type Error = server.Error

// Errorf returns an *Error with status and the message
// fmt.Sprintf(format, args...).
func Errorf(status int, format string, args ...any) error {
	return server.Errorf(status, format, args...)
}
