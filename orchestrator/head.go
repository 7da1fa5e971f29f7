package orchestrator

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/gymlens/gymlens/live"
)

// Head server routes, as NeMo Gym's HeadServer serves them.
const (
	// HeadConfigPath answers the fleet's config dict: a JSON string whose
	// value is the YAML (clients json-decode, then YAML-parse it).
	HeadConfigPath = "/global_config_dict_yaml"
	// HeadInstancesPath answers the list of server processes.
	HeadInstancesPath = "/server_instances"
)

// ServerInstance is one entry of GET /server_instances, with the fields
// of NeMo Gym's ServerInstanceDisplayConfig.
type ServerInstance struct {
	// ConfigPath and ProcessName are the instance name.
	ConfigPath  string `json:"config_path"`
	ProcessName string `json:"process_name"`
	// DirPath is the process's working directory.
	DirPath string `json:"dir_path"`
	// Entrypoint is the program it runs.
	Entrypoint string `json:"entrypoint"`
	Host       string `json:"host"`
	Port       int    `json:"port"`
	URL        string `json:"url"`
	// Name is the implementation (the key under the server type).
	Name string `json:"name"`
	// ServerType is resources_servers, responses_api_models,
	// responses_api_agents or environment_servers.
	ServerType string `json:"server_type"`
	// PID is the process id; null for a server on another host, whose
	// process the head does not know (upstream's field is optional).
	PID *int `json:"pid"`
	// StartTime is when the process was spawned, in Unix seconds.
	StartTime float64 `json:"start_time"`
	// Status is "success" while the process runs and "connection_error"
	// once it has exited.
	Status        string  `json:"status"`
	UptimeSeconds float64 `json:"uptime_seconds"`
}

// headServer is the fleet's head API, served by the orchestrator process.
type headServer struct {
	url  string
	srv  *http.Server
	done chan struct{}
}

// serveHead serves the head API of f on ln until close, every route
// behind g: NeMo Gym's (upstream) and gymlens's own.
func serveHead(ln net.Listener, host string, port int, f *Fleet, g *headGuard) *headServer {
	mux := http.NewServeMux()
	const upstream, ours = true, false
	mux.HandleFunc("GET /{$}", g.guard(upstream, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	}))
	mux.HandleFunc("GET "+HeadConfigPath, g.guard(upstream, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, string(f.ConfigYAML()))
	}))
	mux.HandleFunc("GET "+HeadInstancesPath, g.guard(upstream, func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, f.Instances())
	}))
	mux.HandleFunc("GET "+HeadTelemetryPath, g.guard(ours, serveTelemetryEnv(f)))
	mux.HandleFunc("GET "+HeadStoppingPath, g.guard(ours, serveStopping(f)))
	mux.HandleFunc("POST "+HeadAccountPath, g.guard(ours, serveAccount(f)))
	mux.Handle("GET "+live.StatusPath, g.guard(ours, f.board.ServeHTTP))
	// The live page holds no data (it fetches the status route, token
	// and all): the one gymlens route served without the token.
	mux.Handle("GET "+live.PagePath, live.Page())
	mux.HandleFunc("POST "+HeadStatusSourcePath, g.guard(ours, serveStatusSource(f)))
	// gymlens's prefix: nothing under it answers without the token, not
	// even "not found".
	mux.HandleFunc(HeadGymlensPrefix, g.guard(ours, notFound))
	mux.HandleFunc("/", g.guard(upstream, notFound))
	h := &headServer{
		url: "http://" + net.JoinHostPort(dialHost(host), strconv.Itoa(port)),
		srv: &http.Server{
			Handler:           mux,
			ReadHeaderTimeout: 10 * time.Second,
			ErrorLog:          slog.NewLogLogger(f.log.Handler(), slog.LevelWarn),
		},
		done: make(chan struct{}),
	}
	go func() {
		defer close(h.done)
		if err := h.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			f.log.Error("head server", "err", err)
		}
	}()
	return h
}

// close stops the head server, waiting for requests in flight up to ctx.
func (h *headServer) close(ctx context.Context) error {
	err := h.srv.Shutdown(ctx)
	if err != nil {
		_ = h.srv.Close()
	}
	<-h.done
	return err
}

// notFound answers 404 as NeMo Gym's head server (FastAPI) does.
func notFound(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Instances describes every server process as GET /server_instances
// lists it.
func (f *Fleet) Instances() []ServerInstance {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]ServerInstance, 0, len(f.servers))
	for _, c := range f.servers {
		in := c.info
		status := "success"
		select {
		case <-c.done:
			status = "connection_error"
		default:
		}
		entry := ""
		if len(in.Command) > 0 {
			entry = in.Command[0]
		}
		var pid *int
		if !in.Remote {
			pid = &in.PID
		}
		out = append(out, ServerInstance{
			ConfigPath: in.Spec.Name, ProcessName: in.Spec.Name,
			DirPath: in.Dir, Entrypoint: entry,
			Host: in.Spec.Host, Port: in.Spec.Port, URL: in.URL,
			Name: in.Spec.Impl, ServerType: in.Spec.Type, PID: pid,
			StartTime:     float64(in.Started.UnixNano()) / 1e9,
			Status:        status,
			UptimeSeconds: now.Sub(in.Started).Seconds(),
		})
	}
	return out
}
