package lens

import (
	"os"
	"slices"
	"strconv"
	"strings"

	"go.opentelemetry.io/otel/attribute"
	semconv "go.opentelemetry.io/otel/semconv/v1.40.0"

	"github.com/gymlens/gymlens/contract"
)

// k8sSecretsDir is the directory whose presence marks a Kubernetes pod even
// without KUBERNETES_SERVICE_HOST (a service-account mount). A variable so
// that tests can point it elsewhere.
var k8sSecretsDir = "/var/run/secrets/kubernetes.io"

// detectEnv is what resource detection reads: the environment, the file
// system and the host name. Tests replace it; Setup uses the process's.
type detectEnv struct {
	lookup   func(string) (string, bool)
	exists   func(path string) bool
	hostname func() (string, error)
}

func processDetectEnv() detectEnv {
	return detectEnv{
		lookup: os.LookupEnv,
		exists: func(p string) bool {
			_, err := os.Stat(p)
			return err == nil
		},
		hostname: os.Hostname,
	}
}

func (e detectEnv) get(name string) string {
	v, _ := e.lookup(name)
	return v
}

// ResourceAttributes returns the attributes Setup puts on the resource of
// every signal, before the SDK's own (telemetry.sdk.*) and
// OTEL_RESOURCE_ATTRIBUTES are merged under them. They are built as
// nemo-lens builds them, later entries winning over earlier ones with the
// same key:
//
//  1. service.name, service.version (contract.Version), dl.rank,
//     dl.world_size, and, with a RUN_ID, nemo.run.id and service.instance.id
//     ("<run id>-rank<rank>"); deployment.environment from DEPLOYMENT_ENV
//     (when set at all), else ENVIRONMENT;
//  2. opts.Attributes;
//  3. what is detected: host.name, process.pid, host.gpu.count (the
//     entries of CUDA_VISIBLE_DEVICES, when it is set; no GPU is probed),
//     the SLURM job (slurm.*, when SLURM_JOB_ID is set) and the Kubernetes
//     pod (k8s.*, from the downward-API variables K8S_*, when
//     KUBERNETES_SERVICE_HOST is set or /var/run/secrets/kubernetes.io
//     exists; HOSTNAME stands in for a missing K8S_POD_NAME).
//
// The result has one entry per key, sorted by key.
func ResourceAttributes(cfg Config, opts Options) []attribute.KeyValue {
	return resourceAttributes(cfg, opts, processDetectEnv())
}

func resourceAttributes(cfg Config, opts Options, env detectEnv) []attribute.KeyValue {
	serviceName := opts.ServiceName
	if serviceName == "" {
		serviceName = cfg.ServiceName
	}
	world := max(opts.WorldSize, 1)
	attrs := []attribute.KeyValue{
		semconv.ServiceName(serviceName),
		semconv.ServiceVersion(contract.Version),
		attribute.Int(contract.AttrDLRank, opts.Rank),
		attribute.Int(contract.AttrDLWorldSize, world),
	}
	if cfg.RunID != "" {
		attrs = append(attrs,
			attribute.String(contract.AttrRunID, cfg.RunID),
			semconv.ServiceInstanceID(cfg.RunID+"-rank"+strconv.Itoa(opts.Rank)))
	}
	// DEPLOYMENT_ENV wins whenever it is set, even to nothing.
	deployment, ok := env.lookup("DEPLOYMENT_ENV")
	if !ok {
		deployment = env.get("ENVIRONMENT")
	}
	if deployment != "" {
		attrs = append(attrs, attribute.String(contract.AttrDeploymentEnvironment, deployment))
	}
	attrs = append(attrs, opts.Attributes...)
	attrs = append(attrs, detectLocal(env)...)
	attrs = append(attrs, detectSlurm(env)...)
	attrs = append(attrs, detectKubernetes(env)...)
	return dedupe(attrs)
}

// dedupe keeps the last value of each key and sorts by key.
func dedupe(attrs []attribute.KeyValue) []attribute.KeyValue {
	set := attribute.NewSet(attrs...)
	return slices.Clone(set.ToSlice())
}

func detectLocal(env detectEnv) []attribute.KeyValue {
	var out []attribute.KeyValue
	if h, err := env.hostname(); err == nil {
		out = append(out, semconv.HostName(h))
	}
	out = append(out, semconv.ProcessPID(os.Getpid()))
	if v, ok := env.lookup("CUDA_VISIBLE_DEVICES"); ok {
		n := 0
		if strings.TrimSpace(v) != "" {
			n = strings.Count(v, ",") + 1
		}
		out = append(out, attribute.Int(contract.AttrHostGPUCount, n))
	}
	return out
}

// slurmVars maps SLURM's job variables to their resource keys.
var slurmVars = []struct{ env, key string }{
	{"SLURM_JOB_NAME", contract.AttrSlurmJobName},
	{"SLURM_NODELIST", contract.AttrSlurmNodeList},
	{"SLURM_NNODES", contract.AttrSlurmNNodes},
	{"SLURM_NTASKS", contract.AttrSlurmNTasks},
	{"SLURM_PARTITION", contract.AttrSlurmPartition},
	{"SLURM_CLUSTER_NAME", contract.AttrSlurmClusterName},
}

func detectSlurm(env detectEnv) []attribute.KeyValue {
	job := env.get("SLURM_JOB_ID")
	if job == "" {
		return nil
	}
	out := []attribute.KeyValue{attribute.String(contract.AttrSlurmJobID, job)}
	for _, m := range slurmVars {
		if v := env.get(m.env); v != "" {
			out = append(out, attribute.String(m.key, v))
		}
	}
	return out
}

// k8sVars maps the downward-API variables to their resource keys, in the
// order they are tried: HOSTNAME only fills a pod name still missing.
var k8sVars = []struct {
	env string
	key attribute.Key
}{
	{"K8S_NAMESPACE", semconv.K8SNamespaceNameKey},
	{"K8S_POD_NAME", semconv.K8SPodNameKey},
	{"K8S_POD_UID", semconv.K8SPodUIDKey},
	{"K8S_NODE_NAME", semconv.K8SNodeNameKey},
	{"K8S_CONTAINER_NAME", semconv.K8SContainerNameKey},
	{"K8S_JOB_NAME", semconv.K8SJobNameKey},
	{"HOSTNAME", semconv.K8SPodNameKey},
}

func detectKubernetes(env detectEnv) []attribute.KeyValue {
	if env.get("KUBERNETES_SERVICE_HOST") == "" && !env.exists(k8sSecretsDir) {
		return nil
	}
	var out []attribute.KeyValue
	seen := map[attribute.Key]bool{}
	for _, m := range k8sVars {
		if v := env.get(m.env); v != "" && !seen[m.key] {
			seen[m.key] = true
			out = append(out, m.key.String(v))
		}
	}
	return out
}
