package telfile

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

func sampleEntries() []Entry {
	minV, maxV := IntNumber(1), IntNumber(40)
	return []Entry{
		&Resource{Format: FormatVersion, TimeNS: 1700000000000000000, Attributes: map[string]any{
			"service.name": "gymlens", "process.pid": float64(4242),
		}},
		&Span{
			TraceID: "0102030405060708090a0b0c0d0e0f10", SpanID: "1112131415161718",
			ParentSpanID: "2122232425262728", ParentRemote: true,
			Name: "GET /workouts", Kind: KindServer,
			StartNS: 100, EndNS: 2_000_100,
			Status: StatusError, StatusMessage: "boom",
			Attributes: map[string]any{"http.status": float64(500), "ok": false, "tags": []any{"a", "b"}},
			Events:     []Event{{Name: "retry", TimeNS: 150, Attributes: map[string]any{"attempt": float64(2)}}},
			Scope:      "gymlens/api",
		},
		&Span{
			TraceID: "0102030405060708090a0b0c0d0e0f10", SpanID: "2122232425262728",
			Name: "root", Kind: KindInternal, StartNS: 50, EndNS: 3_000_000,
			Status: StatusUnset, Attributes: map[string]any{}, Scope: "gymlens/api",
		},
		&Metric{
			TimeNS: 900, Scope: "gymlens/api", Name: "requests", Description: "served requests",
			Unit: "{request}", Kind: MetricSum, Temporality: TemporalityCumulative, Monotonic: true,
			Points: []Point{{Attributes: map[string]any{"route": "/x"}, StartNS: 10, TimeNS: 900, Value: IntNumber(9007199254740993)}},
		},
		&Metric{
			TimeNS: 900, Scope: "gymlens/api", Name: "temp", Unit: "Cel", Kind: MetricGauge,
			Points: []Point{{Attributes: map[string]any{}, TimeNS: 900, Value: FloatNumber(21.5)},
				{Attributes: map[string]any{"sensor": "b"}, TimeNS: 900, Value: FloatNumber(math.Inf(-1))}},
		},
		&Metric{
			TimeNS: 900, Scope: "gymlens/api", Name: "latency", Unit: "ms", Kind: MetricHistogram,
			Temporality: TemporalityDelta,
			Points: []Point{
				{Attributes: map[string]any{}, StartNS: 10, TimeNS: 900, Count: 3, Sum: FloatNumber(46.5),
					Min: &minV, Max: &maxV, Bounds: []float64{5, 10, 25}, Counts: []uint64{1, 0, 1, 1}},
				{Attributes: map[string]any{"empty": true}, StartNS: 10, TimeNS: 900, Count: 0, Sum: IntNumber(0),
					Bounds: []float64{5, 10, 25}, Counts: []uint64{0, 0, 0, 0}},
			},
		},
		&Log{
			TimeNS: 1000, ObservedNS: 1001, Severity: "WARN", SeverityNumber: 13,
			Body: "disk <almost> full & slow", Attributes: map[string]any{"free": 0.5},
			TraceID: "0102030405060708090a0b0c0d0e0f10", SpanID: "1112131415161718", Scope: "gymlens/disk",
		},
	}
}

func encodeAll(t *testing.T, entries []Entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	enc := NewEncoder(&buf)
	for _, e := range entries {
		if err := enc.Encode(e); err != nil {
			t.Fatalf("encode %T: %v", e, err)
		}
	}
	return buf.Bytes()
}

func readAll(t *testing.T, data []byte) ([]Record, error) {
	t.Helper()
	var recs []Record
	err := Read(bytes.NewReader(data), func(r Record) error {
		recs = append(recs, r)
		return nil
	})
	return recs, err
}

func entryOf(r Record) Entry {
	switch {
	case r.Resource != nil:
		return r.Resource
	case r.Span != nil:
		return r.Span
	case r.Metric != nil:
		return r.Metric
	case r.Log != nil:
		return r.Log
	}
	return nil
}

func TestRoundTrip(t *testing.T) {
	want := sampleEntries()
	data := encodeAll(t, want)
	recs, err := readAll(t, data)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(want) {
		t.Fatalf("got %d records, want %d", len(recs), len(want))
	}
	for i, r := range recs {
		if r.Line != i+1 {
			t.Errorf("record %d: Line = %d", i, r.Line)
		}
		if r.Type != want[i].RecordType() {
			t.Errorf("record %d: Type = %q, want %q", i, r.Type, want[i].RecordType())
		}
		set := 0
		for _, p := range []bool{r.Resource != nil, r.Span != nil, r.Metric != nil, r.Log != nil} {
			if p {
				set++
			}
		}
		if set != 1 {
			t.Errorf("record %d: %d pointer fields set", i, set)
		}
		if got := entryOf(r); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("record %d mismatch:\n got  %#v\n want %#v", i, got, want[i])
		}
	}

	// Large integers keep their exact value.
	if v, ok := recs[3].Metric.Points[0].Value.Int64(); !ok || v != 9007199254740993 {
		t.Errorf("int value = %d, %v", v, ok)
	}
	if f := recs[4].Metric.Points[1].Value.Float64(); !math.IsInf(f, -1) {
		t.Errorf("gauge -Inf decoded as %v", f)
	}
	if d := recs[1].Span.Duration(); d != 2*time.Millisecond {
		t.Errorf("Duration = %v", d)
	}
	if recs[1].Span.IsRoot() || !recs[2].Span.IsRoot() {
		t.Error("IsRoot wrong")
	}
}

// TestWireShape pins down field names and presence rules that are part of
// the format rather than of the Go types.
func TestWireShape(t *testing.T) {
	lines := strings.Split(strings.TrimSuffix(string(encodeAll(t, sampleEntries())), "\n"), "\n")
	objs := make([]map[string]any, len(lines))
	for i, l := range lines {
		if !strings.HasPrefix(l, `{"type":"`) {
			t.Errorf("line %d does not start with the type field: %s", i+1, l)
		}
		if err := json.Unmarshal([]byte(l), &objs[i]); err != nil {
			t.Fatalf("line %d: %v", i+1, err)
		}
	}
	has := func(i int, key string) bool { _, ok := objs[i][key]; return ok }

	if objs[0]["format"] != float64(1) {
		t.Errorf("resource format = %v", objs[0]["format"])
	}
	if !has(1, "parent_span_id") || !has(1, "parent_remote") || !has(1, "events") {
		t.Errorf("child span missing optional fields: %s", lines[1])
	}
	if has(2, "parent_span_id") || has(2, "parent_remote") || has(2, "events") || has(2, "status_message") {
		t.Errorf("root span has fields that should be omitted: %s", lines[2])
	}
	if objs[3]["monotonic"] != true || objs[3]["temporality"] != "cumulative" {
		t.Errorf("sum line: %s", lines[3])
	}
	if has(4, "monotonic") || has(4, "temporality") || has(4, "description") {
		t.Errorf("gauge line has sum-only fields: %s", lines[4])
	}
	if !strings.Contains(lines[4], `"value":"-Inf"`) {
		t.Errorf("gauge -Inf not written as string: %s", lines[4])
	}
	if has(5, "monotonic") {
		t.Errorf("histogram has monotonic: %s", lines[5])
	}
	hp := objs[5]["points"].([]any)
	p0, p1 := hp[0].(map[string]any), hp[1].(map[string]any)
	for _, k := range []string{"count", "sum", "min", "max", "bounds", "counts", "start_ns", "time_ns", "attributes"} {
		if _, ok := p0[k]; !ok {
			t.Errorf("histogram point missing %q", k)
		}
	}
	if _, ok := p0["value"]; ok {
		t.Error("histogram point has value")
	}
	if _, ok := p1["count"]; !ok {
		t.Error("zero count omitted from histogram point")
	}
	if _, ok := p1["min"]; ok {
		t.Error("undefined min written")
	}
	vp := objs[3]["points"].([]any)[0].(map[string]any)
	if _, ok := vp["count"]; ok {
		t.Error("sum point has count")
	}
	if !strings.Contains(lines[3], `"value":9007199254740993`) {
		t.Errorf("integer value not written exactly: %s", lines[3])
	}
	if !strings.Contains(lines[6], "disk <almost> full & slow") {
		t.Errorf("log body escaped: %s", lines[6])
	}
}

func TestNilAttributesWrittenAsObject(t *testing.T) {
	b, err := AppendLine(nil, Span{Name: "x", Events: []Event{{Name: "e"}}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "null") {
		t.Errorf("nil maps written as null: %s", b)
	}
	if !bytes.HasSuffix(b, []byte("\n")) || bytes.Count(b, []byte("\n")) != 1 {
		t.Errorf("not exactly one line: %q", b)
	}
}

func TestAppendLineErrorLeavesBuffer(t *testing.T) {
	dst := []byte("keep\n")
	out, err := AppendLine(dst, Log{Attributes: map[string]any{"bad": math.NaN()}})
	if err == nil {
		t.Fatal("NaN attribute encoded without error")
	}
	if string(out) != "keep\n" {
		t.Errorf("buffer changed: %q", out)
	}
	// JSONFloat is the escape hatch for writers.
	if _, err := AppendLine(nil, Log{Attributes: map[string]any{"ok": JSONFloat(math.NaN())}}); err != nil {
		t.Errorf("JSONFloat(NaN): %v", err)
	}
}

func TestTruncatedLastLine(t *testing.T) {
	data := encodeAll(t, sampleEntries()[:3])
	data = append(data, `{"type":"span","trace_id":"01020304`...)
	recs, err := readAll(t, data)
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("err = %v, want ErrTruncated", err)
	}
	if !strings.Contains(err.Error(), "line 4") {
		t.Errorf("error does not name line 4: %v", err)
	}
	if len(recs) != 3 {
		t.Errorf("delivered %d records before the truncated line, want 3", len(recs))
	}
}

func TestCompleteLastLineWithoutNewline(t *testing.T) {
	data := bytes.TrimSuffix(encodeAll(t, sampleEntries()), []byte("\n"))
	recs, err := readAll(t, data)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(sampleEntries()) {
		t.Errorf("got %d records", len(recs))
	}
}

func TestCorruptLastLineWithNewlineIsNotTruncation(t *testing.T) {
	data := append(encodeAll(t, sampleEntries()[:1]), "{oops\n"...)
	_, err := readAll(t, data)
	if err == nil || errors.Is(err, ErrTruncated) {
		t.Fatalf("err = %v, want a plain corruption error", err)
	}
}

func TestCorruptMiddleLine(t *testing.T) {
	good := encodeAll(t, sampleEntries()[:2])
	data := append([]byte{}, good...)
	data = append(data, "\n"...) // blank line 3 is skipped but counted
	data = append(data, `{"type":"span",,}`+"\n"...)
	data = append(data, good...)
	recs, err := readAll(t, data)
	if err == nil {
		t.Fatal("no error for corrupt line")
	}
	if errors.Is(err, ErrTruncated) {
		t.Errorf("corrupt middle line reported as truncation: %v", err)
	}
	if !strings.HasPrefix(err.Error(), "line 4:") {
		t.Errorf("error does not name line 4: %v", err)
	}
	if len(recs) != 2 {
		t.Errorf("delivered %d records, want 2", len(recs))
	}
}

func TestWrongFieldType(t *testing.T) {
	_, err := readAll(t, []byte(`{"type":"span","start_ns":"soon"}`+"\n"))
	if err == nil || !strings.Contains(err.Error(), "line 1: bad span record") {
		t.Errorf("err = %v", err)
	}
}

func TestUnknownType(t *testing.T) {
	data := append(encodeAll(t, sampleEntries()[:1]), `{"type":"profile"}`+"\n"...)
	_, err := readAll(t, data)
	if err == nil || !strings.Contains(err.Error(), `line 2: unknown record type "profile"`) {
		t.Errorf("err = %v", err)
	}
	_, err = readAll(t, []byte(`{"name":"x"}`+"\n"))
	if err == nil || !strings.Contains(err.Error(), "missing") {
		t.Errorf("missing type: err = %v", err)
	}
}

func TestNewerFormat(t *testing.T) {
	_, err := readAll(t, []byte(`{"type":"resource","format":2,"time_ns":1,"attributes":{}}`+"\n"))
	if err == nil || !strings.Contains(err.Error(), "newer format") || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("err = %v", err)
	}
}

func TestCallbackErrorStopsReading(t *testing.T) {
	stop := errors.New("stop")
	n := 0
	err := Read(bytes.NewReader(encodeAll(t, sampleEntries())), func(Record) error {
		n++
		if n == 2 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || !strings.Contains(err.Error(), "line 2") || n != 2 {
		t.Errorf("err = %v after %d records", err, n)
	}
}

func TestLongLine(t *testing.T) {
	big := strings.Repeat("x", 17<<20) // over 16 MiB
	data := encodeAll(t, []Entry{&Log{Body: big, Severity: "INFO", SeverityNumber: 9}})
	recs, err := readAll(t, data)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || len(recs[0].Log.Body) != len(big) {
		t.Error("long line not read back intact")
	}
}

func TestReadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "run.jsonl")
	data := append(encodeAll(t, sampleEntries()), "garbage\n"...)
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	n := 0
	err := ReadFile(path, func(Record) error { n++; return nil })
	if err == nil || !strings.HasPrefix(err.Error(), path+": line 8:") {
		t.Errorf("err = %v", err)
	}
	if n != 7 {
		t.Errorf("read %d records", n)
	}
	if err := ReadFile(filepath.Join(t.TempDir(), "nope"), func(Record) error { return nil }); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

func TestNumber(t *testing.T) {
	cases := []struct {
		n    Number
		wire string
		f    float64
	}{
		{"", "0", 0},
		{IntNumber(-7), "-7", -7},
		{FloatNumber(0.1), "0.1", 0.1},
		{FloatNumber(1e300), "1e+300", 1e300},
		{FloatNumber(math.Inf(1)), `"+Inf"`, math.Inf(1)},
	}
	for _, c := range cases {
		b, err := json.Marshal(c.n)
		if err != nil || string(b) != c.wire {
			t.Errorf("Marshal(%q) = %s, %v; want %s", c.n, b, err, c.wire)
		}
		var back Number
		if err := json.Unmarshal(b, &back); err != nil || back.Float64() != c.f {
			t.Errorf("Unmarshal(%s) = %q (%v), %v", b, back, back.Float64(), err)
		}
	}
	if f := FloatNumber(math.NaN()).Float64(); !math.IsNaN(f) {
		t.Errorf("NaN round trip = %v", f)
	}
	if _, err := json.Marshal(Number("12abc")); err == nil {
		t.Error("invalid Number marshalled")
	}
	var n Number
	for _, bad := range []string{`"12"`, `true`, `01`, `1.`, `-`} {
		if err := json.Unmarshal([]byte(bad), &n); err == nil {
			t.Errorf("Unmarshal(%s) accepted", bad)
		}
	}
}

// scanned is one line a Scanner yielded.
type scanned struct {
	line         int
	text         string
	unterminated bool
}

func scanAll(s *Scanner) []scanned {
	var out []scanned
	for s.Scan() {
		out = append(out, scanned{s.Line(), string(s.Bytes()), s.Unterminated()})
	}
	return out
}

func TestScanner(t *testing.T) {
	for _, c := range []struct {
		name, in string
		want     []scanned
	}{
		{"empty", "", nil},
		{"terminated", "a\n\nb\n", []scanned{{1, "a", false}, {2, "", false}, {3, "b", false}}},
		{"unterminated", "a\n  \nbc", []scanned{{1, "a", false}, {2, "  ", false}, {3, "bc", true}}},
		{"carriage return kept", "a\r\n", []scanned{{1, "a\r", false}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := NewScanner(strings.NewReader(c.in))
			if got := scanAll(s); !reflect.DeepEqual(got, c.want) {
				t.Errorf("lines %+v, want %+v", got, c.want)
			}
			if err := s.Err(); err != nil {
				t.Errorf("Err() = %v", err)
			}
		})
	}
}

// endless is a reader of one line that never ends.
type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'x'
	}
	return len(p), nil
}

func TestScannerLineTooLong(t *testing.T) {
	s := NewScanner(io.MultiReader(strings.NewReader("first\n"), endless{}))
	got := scanAll(s)
	err := s.Err()
	if len(got) != 1 || s.Line() != 1 || !errors.Is(err, bufio.ErrTooLong) ||
		!strings.Contains(err.Error(), fmt.Sprint(MaxLineBytes)) {
		t.Errorf("lines %+v, Line() %d, err %v; want line 1 only and an error naming the limit", got, s.Line(), err)
	}
	// Read reports it against the line that is too long.
	err = Read(io.MultiReader(bytes.NewReader(encodeAll(t, sampleEntries()[:1])), endless{}), func(Record) error { return nil })
	if !errors.Is(err, bufio.ErrTooLong) || !strings.HasPrefix(err.Error(), "line 2: longer than") {
		t.Errorf("Read: err = %v", err)
	}
}

// failing is a reader that fails after its data.
type failing struct {
	data string
	err  error
}

func (f *failing) Read(p []byte) (int, error) {
	if f.data == "" {
		return 0, f.err
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

func TestScannerReadError(t *testing.T) {
	boom := errors.New("disk gone")
	s := NewScanner(&failing{data: "a\nb\npartial", err: boom})
	got := scanAll(s)
	if want := []scanned{{1, "a", false}, {2, "b", false}}; !reflect.DeepEqual(got, want) {
		t.Errorf("lines %+v, want %+v", got, want)
	}
	if !errors.Is(s.Err(), boom) || s.Line() != 2 {
		t.Errorf("Err() = %v at line %d, want the reader's error after line 2", s.Err(), s.Line())
	}
	// The part of a line read before the failure is not a truncated
	// record: Read reports the failure.
	data := string(encodeAll(t, sampleEntries()[:1])) + `{"type":"span","trace_id":"01`
	err := Read(&failing{data: data, err: boom}, func(Record) error { return nil })
	if !errors.Is(err, boom) || errors.Is(err, ErrTruncated) || !strings.HasPrefix(err.Error(), "after line 1:") {
		t.Errorf("Read: err = %v, want the reader's error after line 1", err)
	}
}
