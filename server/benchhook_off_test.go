//go:build !gymbench

package server

// gymbenchBuild says whether the test binary has the gymbench tag.
const gymbenchBuild = false
