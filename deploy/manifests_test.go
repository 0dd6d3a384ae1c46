package deploy

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v4/pkg/chart/common"
	"helm.sh/helm/v4/pkg/chart/common/util"
	"helm.sh/helm/v4/pkg/chart/v2/lint"
	"helm.sh/helm/v4/pkg/chart/v2/lint/support"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
	"helm.sh/helm/v4/pkg/engine"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

const chartDir = "helm/acpgate"

// chartCases are the values the chart is linted, rendered and checked
// with: the defaults, and each optional part switched on.
var chartCases = map[string]map[string]any{
	"defaults": {},
	"postgres cluster": {
		"replicas": 3,
		"store":    map[string]any{"type": "postgres"},
		"cluster":  map[string]any{"enabled": true},
	},
	"tls and mtls": {
		"tls":      map[string]any{"enabled": true, "secretName": "acpgate-tls"},
		"auth":     map[string]any{"mode": "mtls", "admins": []any{"spiffe://example.org/ops/*"}},
		"insecure": false,
	},
	"jwt, gemini, service monitor": {
		"auth": map[string]any{"mode": "jwt", "jwt": map[string]any{"jwksConfigMap": "jwks", "issuer": "https://id.example.com", "audience": "acpgate", "claims": []any{"groups"}}},
		"agents": []any{map[string]any{
			"name": "gemini", "command": "gemini", "args": []any{"--acp"},
			"inherit_env": []any{"PATH", "HOME", "GEMINI_API_KEY"}, "auth_method": "gemini-api-key",
			"allow": []any{"claim:groups=ml-team"},
		}},
		"agentEnvFromSecrets": []any{"gemini-api-key"},
		"metrics":             map[string]any{"serviceMonitor": map[string]any{"enabled": true}},
		"config":              map[string]any{"turn_retention": "48h"},
	},
}

// The chart passes helm lint (the same rules as the helm command) with
// every case's values: no error and no warning.
func TestTheHelmChartLintsClean(t *testing.T) {
	for name, values := range chartCases {
		result := lint.RunAll(chartDir, values, "acpgate")
		for _, m := range result.Messages {
			if m.Severity >= support.WarningSev {
				t.Errorf("%s: helm lint: %s", name, m)
			}
		}
	}
}

// Every rendered manifest decodes strictly into its Kubernetes type (a
// misspelt field fails), its acpgate configuration passes serve --check
// in the environment the pod gives it, the files it names are mounted,
// and the pod's grace covers the gateway's drain.
func TestTheHelmChartRendersValidManifestsAndConfigurations(t *testing.T) {
	ch, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	for name, values := range chartCases {
		t.Run(name, func(t *testing.T) {
			vals, err := util.ToRenderValues(ch, values, common.ReleaseOptions{Name: "acpgate", Namespace: "acpgate", IsInstall: true}, common.DefaultCapabilities)
			if err != nil {
				t.Fatal(err)
			}
			files, err := engine.Render(ch, vals)
			if err != nil {
				t.Fatalf("helm template: %v", err)
			}
			var docs []doc
			for file, text := range files {
				if strings.HasSuffix(file, ".txt") || strings.HasSuffix(file, ".tpl") {
					continue
				}
				docs = append(docs, splitDocs(t, file, text)...)
			}
			checkManifests(t, docs)
		})
	}
}

// The plain manifests in kubernetes/ pass the same checks, and each
// kustomization lists files that exist.
func TestThePlainKubernetesManifestsAreValid(t *testing.T) {
	dirs, err := filepath.Glob("kubernetes/*/kustomization.yaml")
	if err != nil || len(dirs) == 0 {
		t.Fatalf("no kustomizations under kubernetes/: %v", err)
	}
	for _, k := range dirs {
		dir := filepath.Dir(k)
		t.Run(dir, func(t *testing.T) {
			var kust struct {
				APIVersion string   `json:"apiVersion"`
				Kind       string   `json:"kind"`
				Resources  []string `json:"resources"`
			}
			b, err := os.ReadFile(k)
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.UnmarshalStrict(b, &kust); err != nil {
				t.Fatalf("%s: %v", k, err)
			}
			files, _ := filepath.Glob(filepath.Join(dir, "*.yaml"))
			var docs []doc
			for _, f := range files {
				if f == k {
					continue
				}
				if !slices.Contains(kust.Resources, filepath.Base(f)) && filepath.Base(f) != "servicemonitor.yaml" {
					t.Errorf("%s is not listed in %s", f, k)
				}
				b, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				docs = append(docs, splitDocs(t, f, string(b))...)
			}
			for _, r := range kust.Resources {
				if _, err := os.Stat(filepath.Join(dir, r)); err != nil {
					t.Errorf("%s lists %s: %v", k, r, err)
				}
			}
			checkManifests(t, docs)
		})
	}
}

type doc struct {
	file string
	text []byte
}

func splitDocs(t *testing.T, file, text string) []doc {
	t.Helper()
	var out []doc
	for _, part := range regexp.MustCompile(`(?m)^---\s*$`).Split(text, -1) {
		var probe map[string]any
		if err := yaml.Unmarshal([]byte(part), &probe); err != nil {
			t.Errorf("%s: %v", file, err)
			continue
		}
		if len(probe) == 0 {
			continue
		}
		out = append(out, doc{file, []byte(part)})
	}
	return out
}

// serviceMonitor is the part of the Prometheus Operator's ServiceMonitor
// the manifests use, so that a misspelt field fails here too (its Go
// types are a module of their own, not worth a dependency).
type serviceMonitor struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"metadata"`
	Spec struct {
		Selector struct {
			MatchLabels map[string]string `json:"matchLabels"`
		} `json:"selector"`
		Endpoints []struct {
			Port     string `json:"port"`
			Path     string `json:"path"`
			Interval string `json:"interval"`
		} `json:"endpoints"`
	} `json:"spec"`
}

// checkManifests decodes each document strictly into its type, then
// checks each StatefulSet with the ConfigMap it mounts.
func checkManifests(t *testing.T, docs []doc) {
	t.Helper()
	configMaps := map[string]*corev1.ConfigMap{}
	var sets []*appsv1.StatefulSet
	for _, d := range docs {
		var head struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(d.text, &head); err != nil {
			t.Errorf("%s: %v", d.file, err)
			continue
		}
		var obj any
		switch head.APIVersion + " " + head.Kind {
		case "v1 ConfigMap":
			obj = &corev1.ConfigMap{}
		case "v1 Service":
			obj = &corev1.Service{}
		case "v1 Secret":
			obj = &corev1.Secret{}
		case "apps/v1 StatefulSet":
			s := &appsv1.StatefulSet{}
			obj = s
			sets = append(sets, s)
		case "policy/v1 PodDisruptionBudget":
			obj = &policyv1.PodDisruptionBudget{}
		case "networking.k8s.io/v1 NetworkPolicy":
			obj = &networkingv1.NetworkPolicy{}
		case "monitoring.coreos.com/v1 ServiceMonitor":
			obj = &serviceMonitor{}
		default:
			t.Errorf("%s: %s %s: a kind this test does not know; add its type", d.file, head.APIVersion, head.Kind)
			continue
		}
		if err := yaml.UnmarshalStrict(d.text, obj); err != nil {
			t.Errorf("%s (%s): %v", d.file, head.Kind, err)
		}
	}
	for _, d := range docs {
		cm := &corev1.ConfigMap{}
		if yaml.Unmarshal(d.text, cm) == nil && cm.Kind == "ConfigMap" {
			configMaps[cm.Name] = cm
		}
	}
	if len(sets) == 0 {
		t.Fatal("no StatefulSet")
	}
	for _, s := range sets {
		checkStatefulSet(t, s, configMaps)
	}
}

func checkStatefulSet(t *testing.T, s *appsv1.StatefulSet, configMaps map[string]*corev1.ConfigMap) {
	t.Helper()
	pod := s.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		t.Fatalf("%s: %d containers, want 1", s.Name, len(pod.Containers))
	}
	c := pod.Containers[0]
	sc, psc := c.SecurityContext, pod.SecurityContext
	if psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot || psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("%s: the pod must run as non-root with seccomp RuntimeDefault", s.Name)
	}
	if sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("%s: the container must drop ALL capabilities, forbid privilege escalation and have a read-only root", s.Name)
	}
	if c.ReadinessProbe == nil || c.StartupProbe == nil {
		t.Errorf("%s: readiness and startup probes are required", s.Name)
	}
	if c.Resources.Requests == nil || c.Resources.Limits == nil {
		t.Errorf("%s: resource requests and limits are required", s.Name)
	}
	// The configuration: the ConfigMap mounted where --config points.
	configPath := c.Args[slices.Index(c.Args, "--config")+1]
	var text string
	for _, m := range c.VolumeMounts {
		if filepath.Dir(configPath) != m.MountPath {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == m.Name && v.ConfigMap != nil {
				if cm := configMaps[v.ConfigMap.Name]; cm != nil {
					text = cm.Data[filepath.Base(configPath)]
				}
			}
		}
	}
	if text == "" {
		t.Fatalf("%s: no ConfigMap holds %s", s.Name, configPath)
	}
	// Every file the configuration names is on a mounted volume.
	var mounts []string
	for _, m := range c.VolumeMounts {
		mounts = append(mounts, m.MountPath)
	}
	files := regexp.MustCompile(`(?m)_file: *"?(/[^"\s]+)`).FindAllStringSubmatch(text, -1)
	for _, f := range files {
		if !slices.ContainsFunc(mounts, func(m string) bool { return strings.HasPrefix(f[1], m+"/") }) {
			t.Errorf("%s: the configuration names %s, on no volume the container mounts (%v)", s.Name, f[1], mounts)
		}
	}
	// The pod's grace covers the preStop sleep, shutdown_grace and the
	// gateway's overrun (internal/server: ShutdownOverrun, 3 s).
	var cfg struct {
		ShutdownGrace string `json:"shutdown_grace"`
	}
	if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
		t.Fatal(err)
	}
	grace, err := time.ParseDuration(cfg.ShutdownGrace)
	if err != nil {
		t.Fatalf("%s: shutdown_grace %q: %v (set it explicitly)", s.Name, cfg.ShutdownGrace, err)
	}
	var preStop time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	if pod.TerminationGracePeriodSeconds == nil || time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second < preStop+grace+3*time.Second {
		t.Errorf("%s: terminationGracePeriodSeconds %v is less than preStop %v + shutdown_grace %v + 3s", s.Name, pod.TerminationGracePeriodSeconds, preStop, grace)
	}
	checkConfig(t, s.Name, text, c.Env)
}

// checkConfig runs acpgate serve --check on a configuration, in an
// environment holding only the variables the container sets (so that a
// ${VAR} the pod does not provide fails), with the files it names created
// under a temporary root: in a pod they come from Secrets.
func checkConfig(t *testing.T, name, text string, env []corev1.EnvVar) {
	t.Helper()
	root := t.TempDir()
	for _, f := range regexp.MustCompile(`(?m)_file: *"?(/[^"\s]+)`).FindAllStringSubmatch(text, -1) {
		p := filepath.Join(root, f[1])
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	text = regexp.MustCompile(`(_file: *"?)(/)`).ReplaceAllString(text, "${1}"+root+"/")
	file := filepath.Join(root, "config.yaml")
	if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(acpgate(t), "serve", "--check", "--config", file)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + root}
	for _, e := range env {
		cmd.Env = append(cmd.Env, e.Name+"=value-of-"+e.Name)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("%s: acpgate serve --check: %v\n%s\nconfiguration:\n%s", name, err, out.String(), text)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binary != "" {
		os.RemoveAll(filepath.Dir(binary))
	}
	os.Exit(code)
}

var (
	buildOnce sync.Once
	binary    string
	buildErr  error
)

// acpgate builds the gateway from this checkout, once per test binary.
func acpgate(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "acpgate-deploy-test-")
		if err != nil {
			buildErr = err
			return
		}
		binary = filepath.Join(dir, "acpgate")
		cmd := exec.Command("go", "build", "-o", binary, "./cmd/acpgate")
		cmd.Dir = ".."
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("building acpgate: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binary
}
