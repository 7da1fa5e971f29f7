package orchestrator

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens/telfile"
)

// A server on another host keeps its telemetry file on its own host, so
// the run's summary would not see what its telemetry lost. The head
// server closes that gap with two routes of its own:
//
//   - GET HeadStoppingPath?server=NAME, which a joined server keeps
//     asking (each call waits up to stoppingPollWait): it answers
//     {"stopping": true} as soon as the fleet begins to stop, so that the
//     server leaves at once rather than when the head stops answering, and
//     marks NAME as a server that will report its account;
//   - POST HeadAccountPath, on which that server hands its account
//     (lens.Handle.Account) once its telemetry has shut down. The head
//     appends it to runs/<id>/telemetry/<NAME>.jsonl, where the report
//     reads every other process's, unless that file (a run directory
//     shared between the hosts) already ends with it.
//
// Stop waits for the account of every server so marked, within the time
// it gives its own servers to drain and flush.
const (
	// HeadStoppingPath answers StoppingStatus.
	HeadStoppingPath = HeadGymlensPrefix + "stopping"
	// HeadAccountPath takes a RemoteAccount.
	HeadAccountPath = HeadGymlensPrefix + "telemetry_account"
	// StoppingServerParam is the query parameter of HeadStoppingPath that
	// names the asking server.
	StoppingServerParam = "server"
)

// stoppingPollWait is how long GET HeadStoppingPath waits for the fleet
// to begin stopping before it answers that it has not; the asker calls
// again.
const stoppingPollWait = 20 * time.Second

// StoppingPollTimeout bounds a client's GET HeadStoppingPath: the wait
// and some room for the network.
const StoppingPollTimeout = stoppingPollWait + 10*time.Second

// maxAccountBytes bounds a RemoteAccount: an account is a few points per
// exporter, a few kilobytes.
const maxAccountBytes = 1 << 20

// StoppingStatus is the answer of GET HeadStoppingPath.
type StoppingStatus struct {
	// Stopping is true once the fleet has begun to stop.
	Stopping bool `json:"stopping"`
}

// RemoteAccount is the body of POST HeadAccountPath.
type RemoteAccount struct {
	// Server is the instance name of the server sending it, one of the
	// fleet's servers on another host.
	Server string `json:"server"`
	// Account is its telemetry account as lens.Handle.Account returns it;
	// empty when its telemetry had nothing to account for (telemetry off).
	Account string `json:"account"`
}

// accountMetrics are the metric names an account may hold.
var accountMetrics = []string{contract.SDKSpanProcessed, contract.SDKSpanExported,
	contract.SDKMetricPointExported, contract.SDKLogProcessed, contract.SDKLogExported}

// remoteChild returns the fleet's server on another host named name.
func (f *Fleet) remoteChild(name string) *child {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.servers {
		if c.remote && c.spec.Name == name {
			return c
		}
	}
	return nil
}

// serveStopping answers GET HeadStoppingPath.
func serveStopping(f *Fleet) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if name := r.URL.Query().Get(StoppingServerParam); name != "" {
			if c := f.remoteChild(name); c != nil {
				f.mu.Lock()
				c.reports = true
				f.mu.Unlock()
			}
		}
		t := time.NewTimer(stoppingPollWait)
		defer t.Stop()
		select {
		case <-f.quit:
			writeJSON(w, http.StatusOK, StoppingStatus{Stopping: true})
		case <-t.C:
			writeJSON(w, http.StatusOK, StoppingStatus{})
		case <-r.Context().Done():
		}
	}
}

// serveAccount answers POST HeadAccountPath: 204 once the account is in
// the run directory, 400 for a body that is not an account, 404 for a
// server that is not one of the fleet's on another host.
func serveAccount(f *Fleet) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var body RemoteAccount
		dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxAccountBytes))
		if err := dec.Decode(&body); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"detail": "want a telemetry account: " + err.Error()})
			return
		}
		c := f.remoteChild(body.Server)
		if c == nil {
			writeJSON(w, http.StatusNotFound, map[string]string{"detail": fmt.Sprintf("no server on another host named %q in this fleet", body.Server)})
			return
		}
		if err := checkAccount([]byte(body.Account)); err != nil {
			writeJSON(w, http.StatusBadRequest, map[string]string{"detail": "want a telemetry account: " + err.Error()})
			return
		}
		if body.Account != "" {
			path := filepath.Join(f.opts.RunDir, contract.RunTelemetryDir, contract.TelemetryFileName(body.Server))
			added, err := appendAccount(path, []byte(body.Account))
			if err != nil {
				f.log.Error("telemetry account of a server on another host not kept", "server", body.Server, "err", err)
				writeJSON(w, http.StatusInternalServerError, map[string]string{"detail": "account not written"})
				return
			}
			f.log.Info("telemetry account of a server on another host", "server", body.Server, "file", path, "appended", added)
		}
		c.accountOnce.Do(func() { close(c.account) })
		w.WriteHeader(http.StatusNoContent)
	}
}

// checkAccount accepts telemetry-file lines that are resource headers and
// the points of the account's counters, and nothing else: the route
// writes into the run directory.
func checkAccount(b []byte) error {
	return telfile.Read(bytes.NewReader(b), func(rec telfile.Record) error {
		switch {
		case rec.Resource != nil:
			return nil
		case rec.Metric != nil && slices.Contains(accountMetrics, rec.Metric.Name):
			return nil
		case rec.Metric != nil:
			return fmt.Errorf("line %d: metric %q is not part of an account", rec.Line, rec.Metric.Name)
		}
		return fmt.Errorf("line %d: a %s record is not part of an account", rec.Line, rec.Type)
	})
}

// appendAccount appends account (a resource header and records) to the
// telemetry file at path, unless the file already ends with its records:
// the server wrote them there itself, through a run directory both hosts
// share. It reports whether it appended.
func appendAccount(path string, account []byte) (bool, error) {
	records := account
	if i := bytes.IndexByte(account, '\n'); i >= 0 {
		records = account[i+1:]
	}
	if len(records) > 0 {
		if f, err := os.Open(path); err == nil {
			tail, terr := readTail(f, len(records))
			f.Close()
			if terr == nil && bytes.Equal(tail, records) {
				return false, nil
			}
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), contract.RunDirPerm); err != nil {
		return false, err
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, contract.RunFilePerm)
	if err != nil {
		return false, err
	}
	_, werr := f.Write(account)
	return true, errors.Join(werr, f.Close())
}

// readTail reads the last n bytes of f (fewer when it is shorter).
func readTail(f *os.File, n int) ([]byte, error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	off := max(fi.Size()-int64(n), 0)
	b := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return b, nil
}

// awaitAccounts waits, until ctx ends, for the account of every server on
// another host that said it would send one and is still in the fleet, and
// warns about the rest.
func (f *Fleet) awaitAccounts(ctx context.Context, servers []*child) {
	for _, c := range servers {
		f.mu.Lock()
		reports := c.remote && c.reports
		f.mu.Unlock()
		if !reports {
			continue
		}
		select {
		case <-c.account:
		case <-c.done:
			// Out of the fleet already (it stopped answering and was
			// dropped): no account is coming.
		case <-ctx.Done():
			f.log.Warn("a server on another host sent no telemetry account before the stop's deadline; the run's summary leaves out what its telemetry lost",
				"server", c.spec.Name)
		}
	}
}
