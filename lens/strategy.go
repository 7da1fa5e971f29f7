package lens

import (
	"crypto/md5"
	"encoding/binary"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Built-in export strategy names.
const (
	StrategyAllRanks         = "all_ranks"
	StrategySingleRank       = "single_rank"
	StrategySampled          = "sampled"
	StrategyFirstRankPerNode = "first_rank_per_node"
)

// ExportContext is what an export strategy decides from.
type ExportContext struct {
	// Rank is this process's rank in [0, WorldSize).
	Rank int
	// WorldSize is the number of ranks; at least 1.
	WorldSize int
	// LocalRank is the rank within this node (LOCAL_RANK).
	LocalRank int
	// ExportRank is the configured EXPORT_RANK, a negative one already
	// mapped to the last rank.
	ExportRank int
	// SampleRate is the configured EXPORT_SAMPLE_RATE, in [0, 1].
	SampleRate float64
}

// ExportStrategy decides whether the process described by ctx exports
// telemetry. It must be deterministic and fast; it runs once per Setup.
type ExportStrategy func(ctx ExportContext) bool

var builtinStrategies = map[string]ExportStrategy{
	StrategyAllRanks:         func(ExportContext) bool { return true },
	StrategySingleRank:       func(c ExportContext) bool { return c.Rank == c.ExportRank },
	StrategySampled:          sampled,
	StrategyFirstRankPerNode: func(c ExportContext) bool { return c.LocalRank == 0 },
}

// sampled keeps a fixed, reproducible subset of ranks, the same subset
// nemo-lens keeps: a rank's point is the MD5 digest of its decimal text,
// read as a 128-bit big-endian number, modulo 10000, over 10000; the rank
// exports when its point is below the rate. The same rank makes the same
// choice in every run and in a Python process.
func sampled(c ExportContext) bool {
	return float64(rankBucket(c.Rank))/10000 < c.SampleRate
}

// rankBucket returns md5(decimal rank) mod 10000. With the digest as
// hi*2^64 + lo, that is (hi mod m)*(2^64 mod m) + lo mod m, all mod m,
// which fits in 64 bits for m = 10000.
func rankBucket(rank int) uint64 {
	const m = 10000
	const twoTo64ModM = 1616 // 18446744073709551616 mod 10000
	sum := md5.Sum([]byte(strconv.Itoa(rank)))
	hi := binary.BigEndian.Uint64(sum[:8])
	lo := binary.BigEndian.Uint64(sum[8:])
	return ((hi%m)*twoTo64ModM + lo%m) % m
}

// strategies holds custom strategies registered by the application. It is
// part of the per-process telemetry state.
var strategies = struct {
	sync.RWMutex
	custom map[string]ExportStrategy
}{custom: map[string]ExportStrategy{}}

// RegisterExportStrategy makes a custom strategy available under name (case
// insensitive). Built-in names cannot be replaced; registering a name twice
// is an error.
func RegisterExportStrategy(name string, s ExportStrategy) error {
	name = normalize(name)
	if name == "" || s == nil {
		return fmt.Errorf("lens: export strategy needs a name and a function")
	}
	if _, ok := builtinStrategies[name]; ok {
		return fmt.Errorf("lens: export strategy %q is built in and cannot be replaced", name)
	}
	strategies.Lock()
	defer strategies.Unlock()
	if _, ok := strategies.custom[name]; ok {
		return fmt.Errorf("lens: export strategy %q already registered", name)
	}
	strategies.custom[name] = s
	return nil
}

// UnregisterExportStrategy removes a custom strategy. Built-in strategies
// cannot be removed; an unknown name is an error.
func UnregisterExportStrategy(name string) error {
	name = normalize(name)
	if _, ok := builtinStrategies[name]; ok {
		return fmt.Errorf("lens: export strategy %q is built in and cannot be removed", name)
	}
	strategies.Lock()
	defer strategies.Unlock()
	if _, ok := strategies.custom[name]; !ok {
		return fmt.Errorf("lens: export strategy %q is not registered", name)
	}
	delete(strategies.custom, name)
	return nil
}

// ExportStrategies returns the sorted names of every registered strategy,
// built-in ones included.
func ExportStrategies() []string {
	strategies.RLock()
	defer strategies.RUnlock()
	out := make([]string, 0, len(builtinStrategies)+len(strategies.custom))
	for n := range builtinStrategies {
		out = append(out, n)
	}
	for n := range strategies.custom {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func lookupStrategy(name string) (ExportStrategy, error) {
	name = normalize(name)
	if s, ok := builtinStrategies[name]; ok {
		return s, nil
	}
	strategies.RLock()
	s, ok := strategies.custom[name]
	strategies.RUnlock()
	if !ok {
		return nil, fmt.Errorf("unknown export strategy %q (registered: %s)", name, strings.Join(ExportStrategies(), ", "))
	}
	return s, nil
}

// ShouldExport applies the strategy named in cfg to this process. WorldSize
// below 1 counts as 1; a rank outside [0, WorldSize) is an error.
func ShouldExport(cfg Config, rank, worldSize, localRank int) (bool, error) {
	if worldSize < 1 {
		worldSize = 1
	}
	if rank < 0 || rank >= worldSize {
		return false, fmt.Errorf("lens: rank %d outside world size %d", rank, worldSize)
	}
	s, err := lookupStrategy(cfg.ExportStrategy)
	if err != nil {
		return false, err
	}
	exportRank := cfg.ExportRank
	if exportRank < 0 {
		exportRank = worldSize - 1
	}
	return s(ExportContext{Rank: rank, WorldSize: worldSize, LocalRank: localRank,
		ExportRank: exportRank, SampleRate: cfg.ExportSampleRate}), nil
}
