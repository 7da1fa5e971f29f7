package lens_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/internal/testenv"
	"github.com/gymlens/gymlens/lens"
)

func strategyConfig(t *testing.T, strategy, rank, rate string) lens.Config {
	t.Helper()
	vars := map[string]string{"NEMO_GYM_OTEL_EXPORT_STRATEGY": strategy}
	if rank != "" {
		vars["NEMO_GYM_OTEL_EXPORT_RANK"] = rank
	}
	if rate != "" {
		vars["NEMO_GYM_OTEL_EXPORT_SAMPLE_RATE"] = rate
	}
	return mustLoad(t, vars)
}

// exportingRanks lists the ranks of a world of size n (local ranks cycling
// through perNode) that the configuration lets export.
func exportingRanks(t *testing.T, cfg lens.Config, n, perNode int) []int {
	t.Helper()
	var out []int
	for r := range n {
		ok, err := lens.ShouldExport(cfg, r, n, r%perNode)
		if err != nil {
			t.Fatalf("ShouldExport(rank %d of %d): %v", r, n, err)
		}
		if ok {
			out = append(out, r)
		}
	}
	return out
}

func TestStrategyAllRanks(t *testing.T) {
	cfg := mustLoad(t, nil) // all_ranks is the default
	if got := exportingRanks(t, cfg, 8, 4); len(got) != 8 {
		t.Errorf("all_ranks exported %v", got)
	}
	if ok, err := lens.ShouldExport(cfg, 0, 0, 0); !ok || err != nil {
		t.Errorf("world size 0 counts as a single process: %v, %v", ok, err)
	}
}

func TestStrategySingleRank(t *testing.T) {
	for _, c := range []struct {
		rank  string
		world int
		want  []int
	}{
		{"-1", 8, []int{7}},
		{"", 5, []int{4}}, // default EXPORT_RANK is -1
		{"0", 8, []int{0}},
		{"3", 8, []int{3}},
		{"8", 8, nil}, // a rank beyond the world: nobody exports
		{"-1", 1, []int{0}},
	} {
		cfg := strategyConfig(t, "single_rank", c.rank, "")
		if got := exportingRanks(t, cfg, c.world, c.world); !slices.Equal(got, c.want) {
			t.Errorf("single_rank EXPORT_RANK=%q world %d: exporters %v, want %v", c.rank, c.world, got, c.want)
		}
	}
}

func TestStrategySampled(t *testing.T) {
	const world = 1000
	none := exportingRanks(t, strategyConfig(t, "sampled", "", "0"), world, 8)
	if len(none) != 0 {
		t.Errorf("rate 0 exported %d ranks", len(none))
	}
	all := exportingRanks(t, strategyConfig(t, "sampled", "", "1"), world, 8)
	if len(all) != world {
		t.Errorf("rate 1 exported %d of %d ranks", len(all), world)
	}
	half := strategyConfig(t, "sampled", "", "0.5")
	first := exportingRanks(t, half, world, 8)
	second := exportingRanks(t, half, world, 8)
	if !slices.Equal(first, second) {
		t.Error("sampled is not deterministic: two runs chose different ranks")
	}
	if len(first) == 0 || len(first) == world {
		t.Errorf("rate 0.5 exported %d of %d ranks, want a proper subset", len(first), world)
	}
	// Subsets nest: a rank kept at 0.25 is kept at 0.5.
	quarter := exportingRanks(t, strategyConfig(t, "sampled", "", "0.25"), world, 8)
	if len(quarter) == 0 || len(quarter) > len(first) {
		t.Errorf("rate 0.25 kept %d ranks, rate 0.5 kept %d", len(quarter), len(first))
	}
	for _, r := range quarter {
		if _, found := slices.BinarySearch(first, r); !found {
			t.Errorf("rank %d kept at 0.25 but not at 0.5", r)
		}
	}
}

// TestStrategySampledProportion checks that a sample rate keeps roughly that
// fraction of the ranks, for a large world and for a typical small one.
func TestStrategySampledProportion(t *testing.T) {
	for _, c := range []struct {
		world    int
		rate     string
		min, max int // inclusive bounds on exporting ranks
	}{
		{1000, "0.5", 300, 700},
		{1000, "0.1", 30, 200},
		{1000, "0.9", 800, 970},
		{64, "0.1", 0, 32},
		{64, "0.5", 16, 48},
	} {
		got := exportingRanks(t, strategyConfig(t, "sampled", "", c.rate), c.world, 8)
		if n := len(got); n < c.min || n > c.max {
			t.Errorf("rate %s over %d ranks exported %d, want %d..%d", c.rate, c.world, n, c.min, c.max)
		}
	}
}

func TestStrategyFirstRankPerNode(t *testing.T) {
	cfg := strategyConfig(t, "first_rank_per_node", "", "")
	if got, want := exportingRanks(t, cfg, 16, 4), []int{0, 4, 8, 12}; !slices.Equal(got, want) {
		t.Errorf("first_rank_per_node exporters %v, want %v", got, want)
	}
}

func TestShouldExportRankOutsideWorld(t *testing.T) {
	cfg := mustLoad(t, nil)
	for _, c := range [][2]int{{-1, 4}, {4, 4}, {10, 4}, {1, 0}, {1, 1}} {
		ok, err := lens.ShouldExport(cfg, c[0], c[1], 0)
		if err == nil || ok {
			t.Errorf("ShouldExport(rank %d, world %d) = %v, %v; want an error", c[0], c[1], ok, err)
		}
	}
}

func TestCustomExportStrategy(t *testing.T) {
	var seen []lens.ExportContext
	evenOnly := func(c lens.ExportContext) bool {
		seen = append(seen, c)
		return c.Rank%2 == 0
	}
	if err := lens.RegisterExportStrategy(" Even_Ranks ", evenOnly); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lens.UnregisterExportStrategy("even_ranks") })

	if !slices.Contains(lens.ExportStrategies(), "even_ranks") {
		t.Errorf("ExportStrategies() = %v lacks even_ranks", lens.ExportStrategies())
	}
	if err := lens.RegisterExportStrategy("EVEN_RANKS", evenOnly); err == nil {
		t.Error("registering a name twice accepted")
	}
	cfg := strategyConfig(t, "even_ranks", "2", "0.3")
	if got := exportingRanks(t, cfg, 6, 3); !slices.Equal(got, []int{0, 2, 4}) {
		t.Errorf("custom strategy exporters %v", got)
	}
	if len(seen) != 6 {
		t.Fatalf("strategy called %d times, want 6", len(seen))
	}
	if c := seen[5]; c.Rank != 5 || c.WorldSize != 6 || c.LocalRank != 2 || c.ExportRank != 2 || c.SampleRate != 0.3 {
		t.Errorf("strategy saw %+v", c)
	}

	if err := lens.UnregisterExportStrategy("Even_Ranks"); err != nil {
		t.Fatalf("Unregister: %v", err)
	}
	if slices.Contains(lens.ExportStrategies(), "even_ranks") {
		t.Error("unregistered strategy still listed")
	}
	if err := lens.UnregisterExportStrategy("even_ranks"); err == nil {
		t.Error("unregistering twice accepted")
	}
	if _, err := lens.ShouldExport(cfg, 0, 6, 0); err == nil {
		t.Error("ShouldExport with an unregistered strategy succeeded")
	}
}

func TestExportContextMapsLastRank(t *testing.T) {
	var got lens.ExportContext
	if err := lens.RegisterExportStrategy("capture_ctx", func(c lens.ExportContext) bool { got = c; return true }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lens.UnregisterExportStrategy("capture_ctx") })
	cfg := strategyConfig(t, "capture_ctx", "-1", "")
	if _, err := lens.ShouldExport(cfg, 1, 12, 1); err != nil {
		t.Fatal(err)
	}
	if got.ExportRank != 11 {
		t.Errorf("ExportRank -1 reached the strategy as %d, want the last rank 11", got.ExportRank)
	}
}

func TestBuiltinStrategiesAreFixed(t *testing.T) {
	never := func(lens.ExportContext) bool { return false }
	builtins := []string{lens.StrategyAllRanks, lens.StrategySingleRank, lens.StrategySampled, lens.StrategyFirstRankPerNode}
	for _, name := range builtins {
		if err := lens.RegisterExportStrategy(name, never); err == nil {
			t.Errorf("built-in %s replaced", name)
		}
		if err := lens.RegisterExportStrategy(strings.ToUpper(name), never); err == nil {
			t.Errorf("built-in %s replaced through its upper-case name", name)
		}
		if err := lens.UnregisterExportStrategy(name); err == nil {
			t.Errorf("built-in %s removed", name)
		}
		if !slices.Contains(lens.ExportStrategies(), name) {
			t.Errorf("built-in %s missing from ExportStrategies()", name)
		}
	}
	// all_ranks still exports everyone.
	if got := exportingRanks(t, mustLoad(t, nil), 3, 3); len(got) != 3 {
		t.Errorf("all_ranks after replacement attempts exported %v", got)
	}
	if err := lens.RegisterExportStrategy("", never); err == nil {
		t.Error("empty name accepted")
	}
	if err := lens.RegisterExportStrategy("nil_fn", nil); err == nil {
		t.Error("nil strategy accepted")
	}
	if !slices.IsSorted(lens.ExportStrategies()) {
		t.Errorf("ExportStrategies() not sorted: %v", lens.ExportStrategies())
	}
}

func TestUnknownStrategyErrorListsRegistered(t *testing.T) {
	if err := lens.RegisterExportStrategy("listed_custom", func(lens.ExportContext) bool { return true }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lens.UnregisterExportStrategy("listed_custom") })
	_, err := lens.LoadConfig(lens.LoadOptions{Lookup: testenv.Lookup(map[string]string{"NEMO_GYM_OTEL_EXPORT_STRATEGY": "round_robin"})})
	errs := configErrors(t, err)
	if len(errs) != 1 {
		t.Fatalf("got %v, want one error", err)
	}
	for _, name := range append(lens.ExportStrategies(), "round_robin") {
		if !strings.Contains(errs[0].Reason, name) {
			t.Errorf("reason %q does not mention %q", errs[0].Reason, name)
		}
	}
	if !strings.Contains(errs[0].Reason, "listed_custom") {
		t.Error("custom strategy not listed")
	}
}

// upstreamBuckets holds, for each rank, int(md5(str(rank)).hexdigest(), 16)
// % 10000 as nemo-lens's sampled strategy computes it, worked out once with
// Python's hashlib.
var upstreamBuckets = []struct{ rank, bucket int }{
	{0, 7850}, {1, 8411}, {2, 9212}, {3, 883}, {4, 1900}, {5, 693}, {6, 412},
	{7, 5555}, {8, 3101}, {9, 8374}, {10, 1824}, {11, 2650}, {12, 8112},
	{13, 4873}, {14, 6038}, {15, 7603}, {31, 901}, {63, 7796}, {64, 789},
	{100, 1869}, {127, 4850}, {255, 8754}, {511, 5599}, {1000, 6517},
	{1023, 7227}, {4095, 9157}, {9999, 1549}, {65535, 3515}, {123456789, 1435},
}

// TestStrategySampledMatchesUpstream pins each rank's point exactly: a rank
// exports when bucket/10000 < rate, so at rate bucket/10000 it must not and
// at (bucket+1)/10000 it must.
func TestStrategySampledMatchesUpstream(t *testing.T) {
	for _, c := range upstreamBuckets {
		cfg := lens.Config{ExportStrategy: lens.StrategySampled}
		world := c.rank + 1
		for _, tc := range []struct {
			rate float64
			want bool
		}{
			{float64(c.bucket) / 10000, false},
			{float64(c.bucket+1) / 10000, true},
			{0, false},
			{1, true},
		} {
			cfg.ExportSampleRate = tc.rate
			got, err := lens.ShouldExport(cfg, c.rank, world, 0)
			if err != nil || got != tc.want {
				t.Errorf("rank %d (bucket %d) at rate %v: export %v, %v; want %v", c.rank, c.bucket, tc.rate, got, err, tc.want)
			}
		}
	}
	// Which of ranks 0..15 a quarter keeps, as a Python process decides.
	cfg := lens.Config{ExportStrategy: lens.StrategySampled, ExportSampleRate: 0.25}
	var kept []int
	for r := range 16 {
		if ok, _ := lens.ShouldExport(cfg, r, 16, 0); ok {
			kept = append(kept, r)
		}
	}
	if want := []int{3, 4, 5, 6, 10}; !slices.Equal(kept, want) {
		t.Errorf("rate 0.25 keeps ranks %v of 0..15, want %v", kept, want)
	}
}
