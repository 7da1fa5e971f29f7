// Package cowmap is a copy-on-write map for the hot paths of telemetry:
// values built once per key (attribute sets, record options) and then read
// on every request or record with one atomic load and one map lookup, no
// lock and no allocation.
//
// A miss builds the value under a mutex and publishes a new copy of the
// map holding it, so a map a reader holds never changes. That makes writes
// cost a copy of the whole map: the package suits maps that stay small
// (one entry per route, status, attribute value) and are written rarely,
// which is also why a builder can refuse to store past a cap.
package cowmap
