package server

import "net/http"

// StripRolloutPrefix is the handler a server with RolloutPrefix mode puts
// in front of its routes, for the differential test against upstream's.
func StripRolloutPrefix(mode PrefixMode, next http.Handler) http.Handler {
	return stripRolloutPrefix(mode, next)
}
