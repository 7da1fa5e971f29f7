package orchestrator

// Tests of child.go's helpers: the stderr tail and the prometheus check.

import (
	"slices"
	"strings"
	"testing"
)

func TestTailBufferKeepsTheLastLines(t *testing.T) {
	tb := newTailBuffer(3)
	if got := tb.Lines(); len(got) != 0 {
		t.Errorf("empty buffer: %q", got)
	}
	_, _ = tb.Write([]byte("one\ntwo\nthr"))
	_, _ = tb.Write([]byte("ee\nfour\nfive\nsi"))
	want := []string{"three", "four", "five", "si"}
	if got := tb.Lines(); !slices.Equal(got, want) {
		t.Errorf("Lines() = %q, want %q", got, want)
	}
	_, _ = tb.Write([]byte("x\n"))
	want = []string{"four", "five", "six"}
	if got := tb.Lines(); !slices.Equal(got, want) {
		t.Errorf("Lines() = %q, want %q", got, want)
	}
}

func TestExportsPrometheus(t *testing.T) {
	for env, want := range map[string]bool{
		"NEMO_GYM_OTEL_ENABLED=1 NEMO_GYM_OTEL_EXPORTER=prometheus": true,
		// Every child has its FILE_PATH (without one its set-up fails).
		"NEMO_GYM_OTEL_ENABLED=1 NEMO_GYM_OTEL_EXPORTER=file,prometheus NEMO_GYM_OTEL_FILE_PATH=t.jsonl": true,
		"NEMO_GYM_OTEL_ENABLED=1 NEMO_GYM_OTEL_EXPORTER=file,prometheus":                                 false,
		// The export strategy counts: this child is not the exporting rank.
		"NEMO_GYM_OTEL_ENABLED=1 NEMO_GYM_OTEL_EXPORTER=prometheus NEMO_GYM_OTEL_EXPORT_STRATEGY=single_rank NEMO_GYM_OTEL_EXPORT_RANK=1": false,
		"NEMO_GYM_OTEL_ENABLED=1 NEMO_GYM_OTEL_EXPORTER=prometheus NEMO_GYM_OTEL_METRICS_ENABLED=0":                                       false,
		"NEMO_GYM_OTEL_ENABLED=1 NEMO_GYM_OTEL_EXPORTER=file":                                                                             false,
		"NEMO_GYM_OTEL_ENABLED=0 NEMO_GYM_OTEL_EXPORTER=prometheus":                                                                       false,
		"NEMO_GYM_OTEL_ENABLED=1 NEMO_GYM_OTEL_EXPORTER=prometheus NEMO_GYM_OTEL_EXPORTER=file":                                           false,
		"NEMO_GYM_OTEL_ENABLED=1 NEMO_GYM_OTEL_EXPORTER=file NEMO_GYM_OTEL_EXPORTER=prometheus":                                           true,
	} {
		if got := exportsPrometheus(strings.Fields(env)); got != want {
			t.Errorf("exportsPrometheus(%s) = %v, want %v", env, got, want)
		}
	}
}
