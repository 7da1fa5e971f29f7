package lens

import (
	"bytes"
	"compress/gzip"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	colmetricpb "go.opentelemetry.io/proto/otlp/collector/metrics/v1"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// The OTLP/HTTP exporters of metrics and logs only speak protobuf. For
// http/json they get an HTTP client whose transport, jsonTransport, turns
// each protobuf request into its OTLP/JSON form on the way out and a JSON
// response back into protobuf on the way in; everything else (endpoint,
// headers, compression, retries) stays the exporter's. The trace exporter
// encodes OTLP/JSON itself (otlptracehttp.WithEncoding).

const (
	contentTypeProtobuf = "application/x-protobuf"
	contentTypeJSON     = "application/json"
	// maxJSONResponse bounds how much of a collector's answer is read.
	maxJSONResponse = 64 << 20
)

// otlpMessages makes the request and response messages of one OTLP
// service.
type otlpMessages struct {
	request, response func() proto.Message
}

var (
	metricsMessages = otlpMessages{
		request:  func() proto.Message { return new(colmetricpb.ExportMetricsServiceRequest) },
		response: func() proto.Message { return new(colmetricpb.ExportMetricsServiceResponse) },
	}
	logsMessages = otlpMessages{
		request:  func() proto.Message { return new(collogspb.ExportLogsServiceRequest) },
		response: func() proto.Message { return new(collogspb.ExportLogsServiceResponse) },
	}
)

// jsonTransport re-encodes OTLP/HTTP protobuf exports as OTLP/JSON.
type jsonTransport struct {
	base *http.Transport
	msgs otlpMessages
}

// RoundTrip sends req's protobuf body as OTLP/JSON, keeping its
// Content-Encoding, and hands back a JSON answer as protobuf, so that the
// exporter sees a partial success the collector reported.
func (t *jsonTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	body, err := readRequestBody(req)
	if err != nil {
		return nil, fmt.Errorf("lens: otlp http/json: read request: %w", err)
	}
	msg := t.msgs.request()
	if err := proto.Unmarshal(body, msg); err != nil {
		return nil, fmt.Errorf("lens: otlp http/json: decode request: %w", err)
	}
	js, err := marshalOTLPJSON(msg)
	if err != nil {
		return nil, fmt.Errorf("lens: otlp http/json: encode request: %w", err)
	}
	if strings.EqualFold(req.Header.Get("Content-Encoding"), "gzip") {
		if js, err = gzipBytes(js); err != nil {
			return nil, fmt.Errorf("lens: otlp http/json: compress request: %w", err)
		}
	}
	out := req.Clone(req.Context())
	out.Header.Set("Content-Type", contentTypeJSON)
	out.Body = io.NopCloser(bytes.NewReader(js))
	out.ContentLength = int64(len(js))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(js)), nil }
	resp, err := t.base.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	t.responseToProtobuf(resp)
	return resp, nil
}

// responseToProtobuf replaces a successful JSON response body with its
// protobuf form. Anything else is left as it came: the exporter reads
// error bodies as text, and ignores a success body it cannot parse.
func (t *jsonTransport) responseToProtobuf(resp *http.Response) {
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return
	}
	if mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type")); err != nil || mt != contentTypeJSON {
		return
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONResponse))
	_ = resp.Body.Close()
	replace := func(b []byte, contentType string) {
		resp.Body = io.NopCloser(bytes.NewReader(b))
		resp.ContentLength = int64(len(b))
		resp.Header.Set("Content-Type", contentType)
		resp.Header.Del("Content-Length")
	}
	if err != nil {
		replace(nil, contentTypeJSON)
		return
	}
	msg := t.msgs.response()
	if len(bytes.TrimSpace(data)) > 0 {
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(data, msg); err != nil {
			replace(data, contentTypeJSON)
			return
		}
	}
	pb, err := proto.Marshal(msg)
	if err != nil {
		replace(data, contentTypeJSON)
		return
	}
	replace(pb, contentTypeProtobuf)
}

func readRequestBody(req *http.Request) ([]byte, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return nil, nil
	}
	defer req.Body.Close()
	var r io.Reader = req.Body
	if strings.EqualFold(req.Header.Get("Content-Encoding"), "gzip") {
		zr, err := gzip.NewReader(req.Body)
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		r = zr
	}
	return io.ReadAll(r)
}

func gzipBytes(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// otlpIDFields are the bytes fields OTLP/JSON spells in hex rather than
// base64: on spans, span links, exemplars and log records.
var otlpIDFields = map[string]bool{"traceId": true, "spanId": true, "parentSpanId": true}

// marshalOTLPJSON encodes msg as the OTLP specification's JSON: protobuf's
// JSON mapping with lowerCamelCase field names and enums as numbers, and
// trace and span ids as hex strings instead of base64.
func marshalOTLPJSON(msg proto.Message) ([]byte, error) {
	b, err := protojson.MarshalOptions{UseEnumNumbers: true}.Marshal(msg)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // keep every number's text exactly
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	if err := hexIDs(doc); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(out.Bytes(), []byte("\n")), nil
}

// hexIDs rewrites, everywhere in doc, the id fields from base64 to hex.
// Attribute keys are values ("key": "traceId"), never object keys, so only
// the protobuf fields match.
func hexIDs(doc any) error {
	switch v := doc.(type) {
	case map[string]any:
		for k, x := range v {
			if s, ok := x.(string); ok && otlpIDFields[k] {
				raw, err := base64.StdEncoding.DecodeString(s)
				if err != nil {
					return fmt.Errorf("%s %q is not base64: %w", k, s, err)
				}
				v[k] = hex.EncodeToString(raw)
				continue
			}
			if err := hexIDs(x); err != nil {
				return err
			}
		}
	case []any:
		for _, x := range v {
			if err := hexIDs(x); err != nil {
				return err
			}
		}
	}
	return nil
}

// newJSONHTTPClient returns the HTTP client an OTLP/HTTP exporter of signal
// ("METRICS" or "LOGS") gets for http/json. A client of one's own replaces
// the exporter's, so the settings the exporter would have applied to its
// own client are read here: the export timeout and the TLS files
// (OTEL_EXPORTER_OTLP_<SIGNAL>_* first, then OTEL_EXPORTER_OTLP_*).
func newJSONHTTPClient(signal string, msgs otlpMessages, lookup func(string) (string, bool)) (*http.Client, *http.Transport, error) {
	env := func(name string) string {
		for _, n := range []string{"OTEL_EXPORTER_OTLP_" + signal + "_" + name, "OTEL_EXPORTER_OTLP_" + name} {
			if v, ok := lookup(n); ok && strings.TrimSpace(v) != "" {
				return strings.TrimSpace(v)
			}
		}
		return ""
	}
	timeout := 10 * time.Second
	if v := env("TIMEOUT"); v != "" {
		if ms, err := ParseInt(v); err == nil && ms > 0 && ms <= maxMillisecondSetting {
			timeout = time.Duration(ms) * time.Millisecond
		}
	}
	base := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	tlsCfg, err := otlpTLSConfig(env("CERTIFICATE"), env("CLIENT_CERTIFICATE"), env("CLIENT_KEY"))
	if err != nil {
		return nil, nil, fmt.Errorf("lens: otlp %s exporter: %w", strings.ToLower(signal), err)
	}
	base.TLSClientConfig = tlsCfg
	return &http.Client{Transport: &jsonTransport{base: base, msgs: msgs}, Timeout: timeout}, base, nil
}

// otlpTLSConfig builds the TLS settings from the OTLP certificate files;
// nil when none is set.
func otlpTLSConfig(caFile, certFile, keyFile string) (*tls.Config, error) {
	if caFile == "" && certFile == "" && keyFile == "" {
		return nil, nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("read CA certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in %s", caFile)
		}
		cfg.RootCAs = pool
	}
	if certFile != "" || keyFile != "" {
		if certFile == "" || keyFile == "" {
			return nil, errors.New("a client certificate needs both CLIENT_CERTIFICATE and CLIENT_KEY")
		}
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("load client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}
