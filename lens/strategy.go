package lens

import (
	"fmt"
	"sort"
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
	// ExportRank is the configured EXPORT_RANK, already mapped from -1 to
	// the last rank.
	ExportRank int
	// SampleRate is the configured EXPORT_SAMPLE_RATE.
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

// sampled keeps a fixed, reproducible subset of ranks: a rank's hash places
// it in [0,1), and it exports when that point falls below the rate. The same
// rank makes the same choice in every run.
func sampled(c ExportContext) bool {
	if c.SampleRate >= 1 {
		return true
	}
	if c.SampleRate <= 0 {
		return false
	}
	return rankPoint(c.Rank) < c.SampleRate
}

// rankPoint mixes the rank with the splitmix64 finaliser, whose output bits
// are well spread even for consecutive small inputs.
func rankPoint(rank int) float64 {
	x := uint64(rank) + 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	return float64(x>>11) / float64(1<<53)
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
