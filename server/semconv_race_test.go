//go:build race

package server_test

// raceEnabled is true when the race detector is on.
const raceEnabled = true
