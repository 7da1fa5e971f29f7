package contract

import "time"

// How long a server process may take to stop after SIGTERM. A server first
// drains its in-flight requests, then flushes its telemetry (which writes
// its span account); whoever stops it must wait for both, or a SIGKILL
// loses the account and the spans still queued.
const (
	// ServerDrainTimeout bounds a server's drain of in-flight requests.
	ServerDrainTimeout = 10 * time.Second
	// TelemetryFlushTimeout bounds a process's final telemetry flush.
	TelemetryFlushTimeout = 10 * time.Second
	// ServerStopTimeout is how long a stopper waits after SIGTERM before
	// SIGKILL: the drain, then the flush, and a margin for the process's
	// own exit.
	ServerStopTimeout = ServerDrainTimeout + TelemetryFlushTimeout + 5*time.Second
)
