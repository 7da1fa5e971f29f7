package orchestrator

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/telfile"
)

// accountLines encodes a resource header and one metric record per name,
// as a process's account is written.
func accountLines(t *testing.T, names ...string) []byte {
	t.Helper()
	var b bytes.Buffer
	enc := telfile.NewEncoder(&b)
	if err := enc.Encode(telfile.Resource{Format: telfile.FormatVersion, Attributes: map[string]any{"service.name": "m"}}); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		m := telfile.Metric{Scope: contract.MeterScope, Name: n, Kind: telfile.MetricSum, Temporality: telfile.TemporalityCumulative, Monotonic: true,
			Points: []telfile.Point{{Attributes: map[string]any{contract.AttrComponentName: "file"}, Value: telfile.IntNumber(7)}}}
		if err := enc.Encode(m); err != nil {
			t.Fatal(err)
		}
	}
	return b.Bytes()
}

// The account route writes what a server on another host lost into the
// run directory, once: not a second time when a shared run directory
// already ends with it, never for a server that is not one of the
// fleet's on another host, and never anything but an account.
func TestRemoteAccountRoute(t *testing.T) {
	dir := t.TempDir()
	remote := &child{spec: ServerSpec{Name: "model"}, remote: true, account: make(chan struct{})}
	local := &child{spec: ServerSpec{Name: "agent"}, account: make(chan struct{})}
	f := &Fleet{opts: Options{RunDir: dir}, log: slog.New(slog.NewTextHandler(io.Discard, nil)), servers: []*child{remote, local}}
	post := func(server string, account []byte) int {
		body, _ := json.Marshal(RemoteAccount{Server: server, Account: string(account)})
		rec := httptest.NewRecorder()
		serveAccount(f)(rec, httptest.NewRequest(http.MethodPost, HeadAccountPath, bytes.NewReader(body)))
		return rec.Code
	}
	file := filepath.Join(dir, contract.RunTelemetryDir, contract.TelemetryFileName("model"))
	good := accountLines(t, contract.SDKSpanProcessed, contract.SDKSpanExported, contract.SDKLogExported)

	for _, c := range []struct {
		what    string
		server  string
		account []byte
		want    int
	}{
		{"a server of this host", "agent", good, http.StatusNotFound},
		{"no such server", "nobody", good, http.StatusNotFound},
		{"another metric", "model", accountLines(t, contract.SDKSpanExported, "gym.rollout.duration"), http.StatusBadRequest},
		{"not telemetry lines", "model", []byte("hello\n"), http.StatusBadRequest},
	} {
		if got := post(c.server, c.account); got != c.want {
			t.Errorf("%s: %d, want %d", c.what, got, c.want)
		}
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("refused accounts left %s behind (%v)", file, err)
	}
	select {
	case <-remote.account:
		t.Fatal("a refused account counted as received")
	default:
	}
	rec := httptest.NewRecorder()
	serveAccount(f)(rec, httptest.NewRequest(http.MethodPost, HeadAccountPath, strings.NewReader(`{"server": "model", "account": 5}`)))
	if rec.Code != http.StatusBadRequest {
		t.Errorf("an account that is not a string: %d, want 400", rec.Code)
	}

	if got := post("model", good); got != http.StatusNoContent {
		t.Fatalf("the account: %d, want 204", got)
	}
	<-remote.account
	if b, _ := os.ReadFile(file); !bytes.Equal(b, good) {
		t.Fatalf("%s holds\n%s\nwant\n%s", file, b, good)
	}
	// Sent again (the file now ends with its records, as a run directory
	// shared with the server's host would): not appended twice.
	if got := post("model", good); got != http.StatusNoContent {
		t.Fatalf("the account again: %d, want 204", got)
	}
	if b, _ := os.ReadFile(file); !bytes.Equal(b, good) {
		t.Errorf("the account was appended twice:\n%s", b)
	}
	// Another account (a later process of the same server) is appended,
	// header and all.
	other := accountLines(t, contract.SDKMetricPointExported)
	if got := post("model", other); got != http.StatusNoContent {
		t.Fatalf("a second account: %d, want 204", got)
	}
	if b, _ := os.ReadFile(file); !bytes.Equal(b, append(append([]byte(nil), good...), other...)) {
		t.Errorf("after a second account %s holds\n%s", file, b)
	}
	// An empty account (telemetry off there) is accepted and writes
	// nothing.
	if got := post("model", nil); got != http.StatusNoContent {
		t.Errorf("an empty account: %d, want 204", got)
	}
}
