package resources_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	protocol "github.com/gymlens/gymlens/internal/legacyproto"
	"github.com/gymlens/gymlens/internal/servertest"
	"github.com/gymlens/gymlens/server"
	"github.com/gymlens/gymlens/servers/resources"
	"github.com/gymlens/gymlens/telemetry"
)

// fuzzBodyLimit is the body limit of the fuzzed server: small, so the 413
// path is reachable with small inputs.
const fuzzBodyLimit = 4 << 10

// maxFuzzBody bounds what the fuzzer sends: past the limit the server
// answers as soon as it has read limit+1 bytes, and a much larger body
// would only test the kernel's socket buffers.
const maxFuzzBody = 64 << 10

// discardSpans is a span exporter that drops everything: the fuzzed server
// records spans (so the telemetry paths see the random input) without the
// test keeping them.
type discardSpans struct{}

func (discardSpans) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discardSpans) Shutdown(context.Context) error                             { return nil }

// expectVerify classifies a /verify body as the runtime and the verifier
// are documented to: what servertest.ExpectDecode says for the decoding,
// then 500 when the expected answer is not a number, else 200.
func expectVerify(body []byte) (req protocol.VerifyRequest, want []int) {
	req, want = servertest.ExpectDecode[protocol.VerifyRequest](body, fuzzBodyLimit)
	if want[0] == http.StatusOK && !servertest.Scorable(req.Task.Expected) {
		want = []int{http.StatusInternalServerError}
	}
	return req, want
}

func FuzzVerifyBody(f *testing.F) {
	for _, seed := range []string{
		`{"task":{"id":"t1","question":"What is 3 + 4?","expected":"7"},"answer":"The answer is 7."}`,
		`{"task":{"id":"t1","question":"q","expected":"7"},"answer":"8"}`,
		`{"task":{"id":"t1","question":"q","expected":" 1,234.50 "},"answer":"about 1234.5 units"}`,
		`{"task":{"id":"t1","question":"q","expected":"-.5"},"answer":"x-.5 or -0.50"}`,
		`{"task":{"id":"t1","question":"q","expected":"+7"},"answer":"7."}`,
		`{"task":{"id":"t1","question":"q","expected":"seven"},"answer":"7"}`,
		`{"task":{"id":"t1","question":"q","expected":"1e3"},"answer":"1000"}`,
		`{"task":{"id":"t1","question":"q","expected":"1,2345"},"answer":"12345"}`,
		`{"task":{"id":"t1","question":"q","expected":""},"answer":""}`,
		`{"task":{"id":"t1","question":"q","expected":"0"},"answer":"no digits here"}`,
		`{"task":{"id":"t1","question":"q","expected":"0.` + strings.Repeat("0", 2000) + `1"},"answer":"0"}`,
		`{"task":{"id":"","question":"q","expected":"7"},"answer":"7"}`,
		`{"task":{"id":" ","question":"q","expected":"7"},"answer":"7"}`,
		`{"task":{"id":"t1","question":"","expected":"7"},"answer":"7"}`,
		`{"task":{"id":"t1","question":"q","expected":7},"answer":"7"}`,
		`{"task":"t1","answer":"7"}`,
		`{"TASK":{"ID":"t1","Question":"q","Expected":"7"},"Answer":"7"}`,
		`{"task":{"id":"t1","question":"q","expected":"7"},"answer":"7","extra":[1,{"a":null}]}`,
		`{"task":{"id":"t1","question":"q","expected":"7"},"answer":"7"}}`,
		`{"task":{"id":"t1","question":"q","expected":"7"},"answer":"7"}]]] trailing`,
		`{"task":{"id":"t1","question":"q","expected":"7"},"answer":"7"} {"again":1}`,
		`{"task":{"id":"t1","question":"q","expected":"7"},"answer":"7"}` + strings.Repeat(" ", fuzzBodyLimit),
		`{"task":{"id":"t1","question":"q","expected":"7"},"answer":"` + strings.Repeat("7", fuzzBodyLimit) + `"}`,
		`{"task":{"id":"\u0000\ud800","question":"\u2028","expected":"7"},"answer":"\uFFFD7"}`,
		"{\"task\":{\"id\":\"\xff\xfe\",\"question\":\"q\",\"expected\":\"7\"},\"answer\":\"7\"}",
		`{"task":{"id":"t1","question":"q","expected":"7"},"answer":"7"`,
		`{"task":{"id":"t1","question":"q","expected":"7"},"answer":"7",}`,
		`{"task":{"id":"t1","question":"q","expected":"7"},"answer":"7","answer":"8"}`,
		``, ` `, `null`, `{}`, `[]`, `"x"`, `0`, `{"task":null}`, "\xef\xbb\xbf{}", `{"a":` + strings.Repeat("[", 600) + strings.Repeat("]", 600) + `}`,
	} {
		f.Add([]byte(seed))
	}

	servertest.EnableTelemetry(f, telemetry.InitOptions{ServerName: resources.ServerName,
		ServerType: telemetry.ServerTypeResources, SpanExporter: discardSpans{}, MetricReader: sdkmetric.NewManualReader()})
	s := server.New(server.Options{Name: resources.ServerName, Type: telemetry.ServerTypeResources,
		MaxBodyBytes: fuzzBodyLimit, Logger: slog.New(slog.DiscardHandler)})
	if err := resources.Register(s, resources.Defaults()); err != nil {
		f.Fatal(err)
	}
	base, _ := servertest.Start(f, s)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	f.Cleanup(func() {
		servertest.CheckHealth(f, client, base)
		client.CloseIdleConnections()
	})

	f.Fuzz(func(t *testing.T, body []byte) {
		if len(body) > maxFuzzBody {
			t.Skip("body too large")
		}
		req, want := expectVerify(body)
		status, raw := servertest.Post(t, client, base+"/verify", body)
		if !slices.Contains(want, status) {
			t.Fatalf("%.200q: status %d (%s), want one of %v", body, status, raw, want)
		}
		if status != http.StatusOK {
			servertest.CheckErrorBody(t, status, raw)
			if status == http.StatusInternalServerError && !strings.Contains(string(raw), resources.ErrExpectedNotNumber.Error()) {
				t.Errorf("500 for another reason than the expected answer: %s", raw)
			}
			servertest.CheckHealth(t, client, base)
			return
		}
		var resp protocol.VerifyResponse
		if err := json.Unmarshal(raw, &resp); err != nil {
			t.Fatalf("200 with a body that is not a VerifyResponse: %v: %s", err, raw)
		}
		tok, found := resources.LastNumber(req.Answer)
		want1, _ := resources.LastNumber(strings.TrimSpace(req.Task.Expected))
		correct := found && servertest.SameNumber(tok, want1)
		if resp.Parsed != tok || resp.Correct != correct || (resp.Reward == 1) != correct || (resp.Reward != 0 && resp.Reward != 1) {
			t.Errorf("answer %.100q, expected %.100q: got %+v; want parsed %q, correct %v",
				req.Answer, req.Task.Expected, resp, tok, correct)
		}
	})
}
