package arithmetic

import (
	"crypto/sha256"
	"encoding/binary"
	"math"
	"time"
)

// maxWorkMicros bounds Config.WorkMicros: one second of CPU per call is
// already far beyond any verifier worth benchmarking.
const maxWorkMicros = 1_000_000

// Calibration: the fastest of calibrationBatches timed batches of
// calibrationRounds rounds each. Taking the fastest keeps a busy machine
// (a batch that was preempted) from inflating the per-round cost and so
// shrinking the work; the whole calibration takes a few milliseconds.
const (
	calibrationBatches = 32
	calibrationRounds  = 256
)

// sha256Rounds hashes the digest into itself n times, starting from seed.
func sha256Rounds(seed [sha256.Size]byte, n int) [sha256.Size]byte {
	sum := seed
	for range n {
		sum = sha256.Sum256(sum[:])
	}
	return sum
}

// calibrateWork returns how many SHA-256 rounds take about micros
// microseconds of CPU on this machine; 0 for micros <= 0.
func calibrateWork(micros int) int {
	if micros <= 0 {
		return 0
	}
	var sum [sha256.Size]byte
	best := time.Duration(math.MaxInt64)
	for range calibrationBatches {
		start := time.Now()
		sum = sha256Rounds(sum, calibrationRounds)
		best = min(best, time.Since(start))
	}
	_ = sum // the timed batches fed each other; nothing else needs the digest
	perRound := max(float64(best.Nanoseconds())/calibrationRounds, 1)
	return max(int(math.Round(float64(micros)*1e3/perRound)), 1)
}

// doWork spends rounds SHA-256 rounds seeded with the task id and returns
// a word of the result (for tests). The hashing is not optimised away even
// when the result is dropped: it runs in the crypto package's assembly.
// Keeping the result in a shared word would add a cache line written by
// every request of a benchmark that measures per-request cost.
func doWork(taskID string, rounds int) uint64 {
	var seed [sha256.Size]byte
	copy(seed[:], taskID)
	sum := sha256Rounds(seed, rounds)
	return binary.LittleEndian.Uint64(sum[:])
}
