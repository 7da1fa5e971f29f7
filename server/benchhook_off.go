//go:build !gymbench

package server

// benchUninstrumented is false in every ordinary build, so the benchmark
// baseline's branch in New compiles away. See benchhook_on.go.
const benchUninstrumented = false
