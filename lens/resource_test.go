package lens_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/gymlens/gymlens/contract"
	"github.com/gymlens/gymlens/lens"
)

// detectionVars are every variable resource detection reads; each test case
// starts with all of them unset.
var detectionVars = []string{
	"DEPLOYMENT_ENV", "ENVIRONMENT", "CUDA_VISIBLE_DEVICES", "HOSTNAME", "KUBERNETES_SERVICE_HOST",
	"K8S_NAMESPACE", "K8S_POD_NAME", "K8S_POD_UID", "K8S_NODE_NAME", "K8S_CONTAINER_NAME", "K8S_JOB_NAME",
	"SLURM_JOB_ID", "SLURM_JOB_NAME", "SLURM_NODELIST", "SLURM_NNODES", "SLURM_NTASKS", "SLURM_PARTITION",
	"SLURM_CLUSTER_NAME", "OTEL_RESOURCE_ATTRIBUTES", "OTEL_SERVICE_NAME",
	"NEMO_GYM_OTEL_RUN_ID", "NEMO_LENS_RUN_ID",
}

func unsetDetectionVars(t *testing.T) {
	t.Helper()
	for _, n := range detectionVars {
		t.Setenv(n, "") // restored when the test ends
		if err := os.Unsetenv(n); err != nil {
			t.Fatal(err)
		}
	}
}

// TestResourceAttributesFromEnvironment holds the resource a real pipeline
// exports, on spans and on metrics, to nemo-lens's providers.py and
// resources/: what is set, from which variable, and what wins.
func TestResourceAttributesFromEnvironment(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	k8sDir := t.TempDir()
	type want = map[string]any // string or int
	cases := []struct {
		name    string
		env     map[string]string
		k8sFile bool // the service-account directory exists
		opts    lens.Options
		want    want
		absent  []string
	}{
		{name: "bare process",
			want: want{"service.name": "svc", "service.version": contract.Version, contract.AttrDLRank: 0,
				contract.AttrDLWorldSize: 1, "host.name": host, "process.pid": os.Getpid()},
			absent: []string{"service.instance.id", contract.AttrRunID, contract.AttrDeploymentEnvironment,
				contract.AttrHostGPUCount, contract.AttrSlurmJobID, "k8s.pod.name"}},
		{name: "run id and rank", env: map[string]string{"NEMO_GYM_OTEL_RUN_ID": "run7"},
			opts: lens.Options{Rank: 2, WorldSize: 4},
			want: want{contract.AttrRunID: "run7", "service.instance.id": "run7-rank2",
				contract.AttrDLRank: 2, contract.AttrDLWorldSize: 4}},
		{name: "run id from the fallback prefix", env: map[string]string{"NEMO_LENS_RUN_ID": "r"},
			want: want{contract.AttrRunID: "r", "service.instance.id": "r-rank0"}},
		{name: "DEPLOYMENT_ENV wins", env: map[string]string{"DEPLOYMENT_ENV": "prod", "ENVIRONMENT": "dev"},
			want: want{contract.AttrDeploymentEnvironment: "prod"}},
		{name: "ENVIRONMENT fallback", env: map[string]string{"ENVIRONMENT": "dev"},
			want: want{contract.AttrDeploymentEnvironment: "dev"}},
		{name: "DEPLOYMENT_ENV set but empty", env: map[string]string{"DEPLOYMENT_ENV": "", "ENVIRONMENT": "dev"},
			absent: []string{contract.AttrDeploymentEnvironment}},
		{name: "three GPUs", env: map[string]string{"CUDA_VISIBLE_DEVICES": "0,1,3"}, want: want{contract.AttrHostGPUCount: 3}},
		{name: "trailing comma counts", env: map[string]string{"CUDA_VISIBLE_DEVICES": "0,1,"}, want: want{contract.AttrHostGPUCount: 3}},
		{name: "no GPU visible", env: map[string]string{"CUDA_VISIBLE_DEVICES": " "}, want: want{contract.AttrHostGPUCount: 0}},
		{name: "SLURM job", env: map[string]string{"SLURM_JOB_ID": "42", "SLURM_JOB_NAME": "train",
			"SLURM_NODELIST": "n[1-2]", "SLURM_NNODES": "2", "SLURM_NTASKS": "16", "SLURM_PARTITION": "batch",
			"SLURM_CLUSTER_NAME": "eos"},
			want: want{contract.AttrSlurmJobID: "42", contract.AttrSlurmJobName: "train", contract.AttrSlurmNodeList: "n[1-2]",
				contract.AttrSlurmNNodes: "2", contract.AttrSlurmNTasks: "16", contract.AttrSlurmPartition: "batch",
				contract.AttrSlurmClusterName: "eos"}},
		{name: "SLURM variables without a job id", env: map[string]string{"SLURM_JOB_NAME": "train"},
			absent: []string{contract.AttrSlurmJobID, contract.AttrSlurmJobName}},
		{name: "Kubernetes downward API", env: map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1",
			"K8S_NAMESPACE": "ns", "K8S_POD_NAME": "pod-a", "K8S_POD_UID": "uid-1", "K8S_NODE_NAME": "node-1",
			"K8S_CONTAINER_NAME": "gym", "K8S_JOB_NAME": "job-1", "HOSTNAME": "host-b"},
			want: want{"k8s.namespace.name": "ns", "k8s.pod.name": "pod-a", "k8s.pod.uid": "uid-1",
				"k8s.node.name": "node-1", "k8s.container.name": "gym", "k8s.job.name": "job-1"}},
		{name: "Kubernetes pod name from HOSTNAME", env: map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "HOSTNAME": "host-b"},
			want: want{"k8s.pod.name": "host-b"}, absent: []string{"k8s.namespace.name"}},
		{name: "Kubernetes by service account", env: map[string]string{"HOSTNAME": "host-c"}, k8sFile: true,
			want: want{"k8s.pod.name": "host-c"}},
		{name: "not Kubernetes", env: map[string]string{"HOSTNAME": "host-d", "K8S_NAMESPACE": "ns"},
			absent: []string{"k8s.pod.name", "k8s.namespace.name"}},
		{name: "caller attributes over lens's, detection over the caller's",
			opts: lens.Options{Attributes: []attribute.KeyValue{attribute.String("service.version", "9"),
				attribute.String("host.name", "mine"), attribute.String("team", "rl")}},
			want: want{"service.version": "9", "host.name": host, "team": "rl"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			unsetDetectionVars(t)
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			dir := filepath.Join(k8sDir, "absent")
			if c.k8sFile {
				dir = k8sDir
			}
			lens.SetK8sSecretsDirForTest(t, dir)
			opts := c.opts
			opts.ServiceName = "svc"
			p := setupInMemory(t, map[string]string{"NEMO_GYM_OTEL_SPAN_GROUPS": "job",
				"NEMO_GYM_OTEL_RUN_ID": os.Getenv("NEMO_GYM_OTEL_RUN_ID"), "NEMO_LENS_RUN_ID": os.Getenv("NEMO_LENS_RUN_ID")}, opts)
			_, span := lens.Start(context.Background(), lens.GroupJob, "probe")
			span.End()
			c2, err := p.h.Meter().Int64Counter("lens_test.resource")
			if err != nil {
				t.Fatal(err)
			}
			c2.Add(context.Background(), 1)
			spans := p.finishedSpans(t)
			if len(spans) != 1 {
				t.Fatalf("%d spans exported", len(spans))
			}
			var rm metricdata.ResourceMetrics
			if err := p.reader.Collect(context.Background(), &rm); err != nil {
				t.Fatal(err)
			}
			cfg := p.h.Config()
			listed := attribute.NewSet(lens.ResourceAttributes(cfg, opts)...)
			for signal, set := range map[string]*attribute.Set{"span": spans[0].Resource.Set(), "metric": rm.Resource.Set(), "ResourceAttributes": &listed} {
				for k, w := range c.want {
					got, ok := set.Value(attribute.Key(k))
					switch w := w.(type) {
					case int:
						if !ok || got.Type() != attribute.INT64 || got.AsInt64() != int64(w) {
							t.Errorf("%s resource %s = %v (%v), want int %d", signal, k, got.Emit(), got.Type(), w)
						}
					case string:
						if !ok || got.Type() != attribute.STRING || got.AsString() != w {
							t.Errorf("%s resource %s = %q (%v), want %q", signal, k, got.Emit(), got.Type(), w)
						}
					}
				}
				for _, k := range c.absent {
					if v, ok := set.Value(attribute.Key(k)); ok {
						t.Errorf("%s resource has %s = %q, want none", signal, k, v.Emit())
					}
				}
			}
		})
	}
}
