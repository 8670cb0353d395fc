package chartcheck

// X-O7: agentd's Helm chart, rendered with the pinned Helm's Go API for each
// values file in deploy/helm/agentd/ci, linted as `helm lint --strict` does,
// every rendered object decoded strictly into its Kubernetes API type (a
// field the type does not have is an error), and held to our own rules.
// The renderings are kept in deploy/testdata (go test -update rewrites
// them), where deploy/chart_test.go in the main module loads the rendered
// agentd.yaml with agentd's own configuration loader.

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/releaseutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

var update = flag.Bool("update", false, "rewrite the renderings in deploy/testdata")

const (
	chartDir  = "../../deploy/helm/agentd"
	release   = "agentd"
	namespace = "agentd"
	// The Kubernetes version rendered for: the oldest the chart supports,
	// where gRPC probes are generally available.
	kubeVersion = "v1.27.0"
)

// rendered is one rendering: its objects by kind and name.
type rendered struct {
	deployments     map[string]*appsv1.Deployment
	services        map[string]*corev1.Service
	configMaps      map[string]*corev1.ConfigMap
	secrets         map[string]*corev1.Secret
	pdbs            map[string]*policyv1.PodDisruptionBudget
	networkPolicies map[string]*networkingv1.NetworkPolicy
	serviceMonitors map[string]*monitoringv1.ServiceMonitor
	serviceAccounts map[string]*corev1.ServiceAccount
}

func TestChart(t *testing.T) {
	for _, tc := range []struct {
		values string // in the chart's ci/
		check  func(t *testing.T, r *rendered)
	}{
		{"single-sqlite-values.yaml", checkSingle},
		{"replicated-postgres-values.yaml", checkReplicated},
	} {
		t.Run(strings.TrimSuffix(tc.values, "-values.yaml"), func(t *testing.T) {
			valuesFile := filepath.Join(chartDir, "ci", tc.values)
			vals, err := chartutil.ReadValuesFile(valuesFile)
			if err != nil {
				t.Fatal(err)
			}
			lint(t, vals)
			manifest := render(t, vals)
			golden(t, "chart-"+strings.TrimSuffix(tc.values, "-values.yaml")+".yaml", manifest)
			r := decode(t, manifest)
			checkRules(t, r)
			tc.check(t, r)
		})
	}
}

// TestChartRefuses: what agentd would refuse at start, rendering refuses,
// naming the value to set.
func TestChartRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		set  func(v chartutil.Values)
		want string
	}{
		{"unauthenticated", func(v chartutil.Values) { v["insecure"] = false }, "configure auth"},
		{"replicas on SQLite", func(v chartutil.Values) { v["replicaCount"] = 3 }, "needs store.driver: postgres"},
		{"latest", func(v chartutil.Values) { v["image"].(map[string]any)["tag"] = "latest" }, "latest is not a version"},
		{"PostgreSQL without a DSN", func(v chartutil.Values) { v["store"].(map[string]any)["driver"] = "postgres" }, "secrets.storeDSN"},
		{"encryption without a key", func(v chartutil.Values) { v["store"].(map[string]any)["encryptionKey"] = true }, "secrets.encryptionKey"},
		{"TLS without a Secret", func(v chartutil.Values) { v["tls"] = map[string]any{"enabled": true} }, "tls.secretName"},
		{"a bridge without insecure", func(v chartutil.Values) {
			v["insecure"] = false
			v["auth"] = map[string]any{"apiKeys": []any{map[string]any{"name": "a", "sha256": strings.Repeat("0", 64)}}}
			v["bridge"] = map[string]any{"enabled": true}
		}, "the hop to the bridge is plaintext"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vals, err := chartutil.ReadValuesFile(filepath.Join(chartDir, "ci", "single-sqlite-values.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			tc.set(vals)
			_, err = tryRender(t, vals)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("rendered with %s: %v, want an error saying %q", tc.name, err, tc.want)
			}
		})
	}
}

// lint is `helm lint --strict -f values`: a warning fails too.
func lint(t *testing.T, vals chartutil.Values) {
	t.Helper()
	l := action.NewLint()
	l.Strict = true
	l.Namespace = namespace
	kv, err := chartutil.ParseKubeVersion(kubeVersion)
	if err != nil {
		t.Fatal(err)
	}
	l.KubeVersion = kv
	res := l.Run([]string{chartDir}, vals.AsMap())
	for _, m := range res.Messages {
		t.Logf("helm lint: %s", m)
	}
	for _, err := range res.Errors {
		t.Errorf("helm lint: %v", err)
	}
}

// render is `helm template` of the chart with vals.
func render(t *testing.T, vals chartutil.Values) string {
	t.Helper()
	manifest, err := tryRender(t, vals)
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	return manifest
}

// tryRender renders the chart with vals as `helm template` does, for the
// Kubernetes version kubeVersion.
func tryRender(t *testing.T, vals chartutil.Values) (string, error) {
	t.Helper()
	chrt, err := loader.Load(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	install := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	install.DryRun = true
	install.ClientOnly = true
	install.Replace = true
	install.ReleaseName = release
	install.Namespace = namespace
	if install.KubeVersion, err = chartutil.ParseKubeVersion(kubeVersion); err != nil {
		t.Fatal(err)
	}
	rel, err := install.Run(chrt, vals.AsMap())
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// golden compares the rendering with the one kept in deploy/testdata, or
// rewrites it with -update.
func golden(t *testing.T, name, manifest string) {
	t.Helper()
	path := filepath.Join("..", "..", "deploy", "testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(manifest), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	kept, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (go test ./chartcheck -update writes it)", err)
	}
	if string(kept) != manifest {
		t.Errorf("%s differs from the chart's rendering: run `cd tools && go test ./chartcheck -update` and review the difference", path)
	}
}

// decode splits the manifest and decodes every object strictly into its
// API type: a field the type does not know, a duplicate key or a value of
// the wrong type is an error, as the API server's strict validation would
// have it.
func decode(t *testing.T, manifest string) *rendered {
	t.Helper()
	r := &rendered{
		deployments:     map[string]*appsv1.Deployment{},
		services:        map[string]*corev1.Service{},
		configMaps:      map[string]*corev1.ConfigMap{},
		secrets:         map[string]*corev1.Secret{},
		pdbs:            map[string]*policyv1.PodDisruptionBudget{},
		networkPolicies: map[string]*networkingv1.NetworkPolicy{},
		serviceMonitors: map[string]*monitoringv1.ServiceMonitor{},
		serviceAccounts: map[string]*corev1.ServiceAccount{},
	}
	docs := releaseutil.SplitManifests(manifest)
	keys := make([]string, 0, len(docs))
	for k := range docs {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b string) int {
		ai, _ := strconv.Atoi(strings.TrimPrefix(a, "manifest-"))
		bi, _ := strconv.Atoi(strings.TrimPrefix(b, "manifest-"))
		return ai - bi
	})
	for _, k := range keys {
		js, err := yaml.YAMLToJSONStrict([]byte(docs[k]))
		if err != nil {
			t.Fatalf("%s: %v\n%s", k, err, docs[k])
		}
		if string(js) == "null" {
			continue // a template that rendered nothing
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(js, &tm); err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		into, ok := newObject(tm)
		if !ok {
			t.Fatalf("%s: %s %s is not a kind this test knows: add its API type", k, tm.APIVersion, tm.Kind)
		}
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(into); err != nil {
			t.Fatalf("%s %s: %v\n%s", tm.Kind, k, err, docs[k])
		}
		obj := into.(metav1.Object)
		if obj.GetName() == "" {
			t.Errorf("%s %s has no name", tm.Kind, k)
		}
		if ns := obj.GetNamespace(); ns != "" && ns != namespace {
			t.Errorf("%s %s: namespace %q, not the release's", tm.Kind, obj.GetName(), ns)
		}
		switch o := into.(type) {
		case *appsv1.Deployment:
			r.deployments[o.Name] = o
		case *corev1.Service:
			r.services[o.Name] = o
		case *corev1.ConfigMap:
			r.configMaps[o.Name] = o
		case *corev1.Secret:
			r.secrets[o.Name] = o
		case *corev1.ServiceAccount:
			r.serviceAccounts[o.Name] = o
		case *policyv1.PodDisruptionBudget:
			r.pdbs[o.Name] = o
		case *networkingv1.NetworkPolicy:
			r.networkPolicies[o.Name] = o
		case *monitoringv1.ServiceMonitor:
			r.serviceMonitors[o.Name] = o
		}
	}
	return r
}

// newObject is an empty object of the API type that tm names.
func newObject(tm metav1.TypeMeta) (any, bool) {
	switch tm.APIVersion + " " + tm.Kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, true
	case "v1 Service":
		return &corev1.Service{}, true
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, true
	case "v1 Secret":
		return &corev1.Secret{}, true
	case "v1 ServiceAccount":
		return &corev1.ServiceAccount{}, true
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, true
	case "networking.k8s.io/v1 NetworkPolicy":
		return &networkingv1.NetworkPolicy{}, true
	case "monitoring.coreos.com/v1 ServiceMonitor":
		return &monitoringv1.ServiceMonitor{}, true
	}
	return nil, false
}

// agentdConfig is agentd.yaml as the chart renders it: from the ConfigMap,
// or from the Secret when it lists API keys.
func agentdConfig(t *testing.T, r *rendered) map[string]any {
	t.Helper()
	var text string
	if cm, ok := r.configMaps[release+"-config"]; ok {
		text = cm.Data["agentd.yaml"]
	} else if s, ok := r.secrets[release+"-config"]; ok {
		text = string(s.Data["agentd.yaml"])
	}
	if text == "" {
		t.Fatalf("no agentd.yaml in a ConfigMap or Secret %s-config", release)
	}
	var cfg map[string]any
	if err := yaml.UnmarshalStrict([]byte(text), &cfg); err != nil {
		t.Fatalf("agentd.yaml: %v", err)
	}
	return cfg
}

// lookup is the value at a dotted path of cfg, or nil.
func lookup(cfg map[string]any, path string) any {
	var v any = cfg
	for _, k := range strings.Split(path, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

// checkRules holds every rendering to the rules of our own.
func checkRules(t *testing.T, r *rendered) {
	t.Helper()
	cfg := agentdConfig(t, r)
	if len(r.deployments) == 0 {
		t.Fatal("no Deployment rendered")
	}
	drain, grace := seconds(t, lookup(cfg, "shutdown_drain")), seconds(t, lookup(cfg, "shutdown_grace"))
	for name, d := range r.deployments {
		checkDeployment(t, r, name, d, drain+grace)
	}
	for name, s := range r.services {
		d := selected(r, s.Spec.Selector)
		if d == nil {
			t.Errorf("Service %s selects no Deployment's pods", name)
			continue
		}
		for _, p := range s.Spec.Ports {
			if !hasPort(d.Spec.Template.Spec.Containers, p.TargetPort.String()) {
				t.Errorf("Service %s: port %s targets %s, which Deployment %s's containers do not declare", name, p.Name, p.TargetPort.String(), d.Name)
			}
		}
	}
	for name, p := range r.pdbs {
		sel, err := metav1.LabelSelectorAsMap(p.Spec.Selector)
		if err != nil {
			t.Fatal(err)
		}
		d := selected(r, sel)
		if d == nil || d.Spec.Replicas == nil || *d.Spec.Replicas < 2 {
			t.Errorf("PodDisruptionBudget %s selects no Deployment of several replicas", name)
		}
	}
	for name, sm := range r.serviceMonitors {
		for _, ep := range sm.Spec.Endpoints {
			found := false
			for _, s := range r.services {
				if labels.SelectorFromSet(sm.Spec.Selector.MatchLabels).Matches(labels.Set(s.Labels)) && slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
					found = true
				}
			}
			if !found {
				t.Errorf("ServiceMonitor %s: no Service it selects has a port %q", name, ep.Port)
			}
		}
	}
	checkNoSecretInConfigMaps(t, r)
}

// checkDeployment holds a Deployment's pods to the rules: probes, non-root,
// read-only root filesystem without capabilities, resource requests, a
// pinned image, a writable /tmp, and the config and secrets it names
// rendered.
func checkDeployment(t *testing.T, r *rendered, name string, d *appsv1.Deployment, stopSeconds int) {
	t.Helper()
	spec := d.Spec.Template.Spec
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("Deployment %s: its selector does not match its pods' labels", name)
	}
	if spec.TerminationGracePeriodSeconds == nil || *spec.TerminationGracePeriodSeconds <= int64(stopSeconds) {
		t.Errorf("Deployment %s: terminationGracePeriodSeconds must exceed shutdown_drain + shutdown_grace (%ds)", name, stopSeconds)
	}
	podNonRoot := spec.SecurityContext != nil && spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot
	if spec.SecurityContext == nil || spec.SecurityContext.RunAsUser == nil || *spec.SecurityContext.RunAsUser == 0 {
		t.Errorf("Deployment %s: the pod names no non-root runAsUser", name)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
		switch {
		case v.ConfigMap != nil:
			if _, ok := r.configMaps[v.ConfigMap.Name]; !ok {
				t.Errorf("Deployment %s: volume %s names ConfigMap %s, not rendered", name, v.Name, v.ConfigMap.Name)
			}
		case v.Secret != nil:
			if _, ok := r.secrets[v.Secret.SecretName]; !ok {
				t.Errorf("Deployment %s: volume %s names Secret %s, not rendered", name, v.Name, v.Secret.SecretName)
			}
		}
	}
	if spec.ServiceAccountName != "" {
		if _, ok := r.serviceAccounts[spec.ServiceAccountName]; !ok {
			t.Errorf("Deployment %s: ServiceAccount %s not rendered", name, spec.ServiceAccountName)
		}
	}
	if len(spec.Containers) == 0 {
		t.Errorf("Deployment %s has no container", name)
	}
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		where := fmt.Sprintf("Deployment %s, container %s", name, c.Name)
		if c.LivenessProbe == nil || c.ReadinessProbe == nil {
			t.Errorf("%s: needs both a liveness and a readiness probe", where)
		} else {
			for probe, want := range map[*corev1.Probe]string{c.LivenessProbe: "liveness", c.ReadinessProbe: "readiness"} {
				if g := probe.GRPC; g != nil {
					if service := ptr.Deref(g.Service, ""); service != want {
						t.Errorf("%s: the %s probe asks gRPC health for %q, not %q", where, want, service, want)
					}
					if !hasPort([]corev1.Container{c}, strconv.Itoa(int(g.Port))) {
						t.Errorf("%s: the %s probe's port %d is not a container port", where, want, g.Port)
					}
				}
			}
		}
		sc := c.SecurityContext
		switch {
		case sc == nil:
			t.Errorf("%s: no securityContext", where)
		default:
			if !podNonRoot && (sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot) || sc.RunAsNonRoot != nil && !*sc.RunAsNonRoot {
				t.Errorf("%s: runAsNonRoot is not true", where)
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				t.Errorf("%s: readOnlyRootFilesystem is not true", where)
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				t.Errorf("%s: allowPrivilegeEscalation is not false", where)
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
				t.Errorf("%s: capabilities must drop ALL and add none", where)
			}
		}
		if _, ok := c.Resources.Requests[corev1.ResourceCPU]; !ok {
			t.Errorf("%s: no cpu request", where)
		}
		if _, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok {
			t.Errorf("%s: no memory request", where)
		}
		if err := pinned(c.Image); err != nil {
			t.Errorf("%s: image %q: %v", where, c.Image, err)
		}
		mounts := map[string]corev1.VolumeMount{}
		for _, m := range c.VolumeMounts {
			mounts[m.MountPath] = m
			if _, ok := volumes[m.Name]; !ok {
				t.Errorf("%s: mounts volume %s, which the pod does not have", where, m.Name)
			}
		}
		if m, ok := mounts["/tmp"]; !ok || volumes[m.Name].EmptyDir == nil || m.ReadOnly {
			t.Errorf("%s: /tmp must be a writable emptyDir", where)
		}
		configPath := ""
		for _, e := range c.Env {
			if e.Name == "AGENTD_CONFIG" {
				configPath = e.Value
			}
		}
		if m, ok := mounts[filepath.Dir(configPath)]; !ok || !m.ReadOnly {
			t.Errorf("%s: AGENTD_CONFIG %q is not in a read-only mounted volume", where, configPath)
		}
		for _, from := range c.EnvFrom {
			if from.SecretRef != nil {
				if _, ok := r.secrets[from.SecretRef.Name]; !ok {
					t.Errorf("%s: envFrom names Secret %s, not rendered", where, from.SecretRef.Name)
				}
			}
		}
	}
}

// pinned reports why an image reference is not pinned to a version: no
// tag or digest, or the tag latest.
func pinned(image string) error {
	if _, digest, ok := strings.Cut(image, "@"); ok {
		if !strings.HasPrefix(digest, "sha256:") {
			return fmt.Errorf("digest %q is not sha256", digest)
		}
		return nil
	}
	last := image[strings.LastIndex(image, "/")+1:]
	_, tag, ok := strings.Cut(last, ":")
	switch {
	case !ok || tag == "":
		return fmt.Errorf("no tag or digest")
	case tag == "latest":
		return fmt.Errorf("the tag latest is not a version")
	}
	return nil
}

// checkNoSecretInConfigMaps: no ConfigMap holds a value of a rendered
// Secret, and agentd.yaml in a ConfigMap sets none of the settings that
// hold secrets (store.dsn, a provider's api_key, auth.api_keys).
func checkNoSecretInConfigMaps(t *testing.T, r *rendered) {
	t.Helper()
	var secretValues []string
	for _, s := range r.secrets {
		for k, v := range s.Data {
			if k == "agentd.yaml" {
				continue // the config, when it lists API-key hashes
			}
			if len(v) >= 8 {
				secretValues = append(secretValues, string(v))
			}
		}
	}
	for name, cm := range r.configMaps {
		for key, text := range cm.Data {
			for _, sv := range secretValues {
				if strings.Contains(text, sv) {
					t.Errorf("ConfigMap %s, %s: holds a value of a Secret", name, key)
				}
			}
			if key != "agentd.yaml" {
				continue
			}
			var cfg map[string]any
			if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
				t.Fatalf("ConfigMap %s: %v", name, err)
			}
			for _, path := range []string{"store.dsn", "auth.api_keys"} {
				if v := lookup(cfg, path); v != nil && v != "" {
					t.Errorf("ConfigMap %s: agentd.yaml sets %s, a secret", name, path)
				}
			}
			if providers, ok := cfg["providers"].(map[string]any); ok {
				for p := range providers {
					if v := lookup(cfg, "providers."+p+".api_key"); v != nil && v != "" {
						t.Errorf("ConfigMap %s: agentd.yaml sets providers.%s.api_key, a secret", name, p)
					}
				}
			}
		}
	}
}

// selected is the Deployment whose pods sel selects, or nil.
func selected(r *rendered, sel map[string]string) *appsv1.Deployment {
	if len(sel) == 0 {
		return nil
	}
	for _, d := range r.deployments {
		if labels.SelectorFromSet(sel).Matches(labels.Set(d.Spec.Template.Labels)) {
			return d
		}
	}
	return nil
}

// hasPort reports whether a container declares port, by name or number.
func hasPort(cs []corev1.Container, port string) bool {
	for _, c := range cs {
		for _, p := range c.Ports {
			if p.Name == port || strconv.Itoa(int(p.ContainerPort)) == port {
				return true
			}
		}
	}
	return false
}

// seconds parses a duration setting such as "5s" into whole seconds.
func seconds(t *testing.T, v any) int {
	t.Helper()
	s, _ := v.(string)
	n, err := strconv.Atoi(strings.TrimSuffix(s, "s"))
	if err != nil || !strings.HasSuffix(s, "s") {
		t.Fatalf("duration %v: want whole seconds such as 5s", v)
	}
	return n
}

// container is the named Deployment's only container.
func container(t *testing.T, r *rendered, deployment string) corev1.Container {
	t.Helper()
	d, ok := r.deployments[deployment]
	if !ok {
		t.Fatalf("no Deployment %s", deployment)
	}
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("Deployment %s: %d containers, want 1", deployment, n)
	}
	return d.Spec.Template.Spec.Containers[0]
}

func replicas(r *rendered, deployment string) int32 {
	d, ok := r.deployments[deployment]
	if !ok || d.Spec.Replicas == nil {
		return -1
	}
	return *d.Spec.Replicas
}

// checkSingle: one agentd, the bridge embedded, SQLite.
func checkSingle(t *testing.T, r *rendered) {
	cfg := agentdConfig(t, r)
	if n := replicas(r, release); n != 1 {
		t.Errorf("agentd replicas %d, want 1", n)
	}
	if len(r.deployments) != 1 {
		t.Errorf("Deployments %v, want agentd alone: the bridge is embedded", slices.Sorted(maps.Keys(r.deployments)))
	}
	if got := lookup(cfg, "store.driver"); got != "sqlite" {
		t.Errorf("store.driver %v, want sqlite", got)
	}
	if got := lookup(cfg, "bridge.address"); got != nil {
		t.Errorf("bridge.address %v, want none (embedded)", got)
	}
	if _, ok := r.configMaps[release+"-config"]; !ok {
		t.Error("agentd.yaml is not in a ConfigMap")
	}
	c := container(t, r, release)
	if c.LivenessProbe.GRPC == nil || c.ReadinessProbe.GRPC == nil {
		t.Error("agentd's probes are not gRPC health checks")
	}
	if len(r.pdbs) != 0 || len(r.serviceMonitors) != 0 || len(r.networkPolicies) != 0 {
		t.Error("one replica without a bridge or a ServiceMonitor renders no PodDisruptionBudget, ServiceMonitor or NetworkPolicy")
	}
	if state := lookup(cfg, "state_dir"); !mounted(c, state) {
		t.Errorf("state_dir %v is not a mounted volume", state)
	}
}

// checkReplicated: three agentd replicas on PostgreSQL, two bridges behind
// a headless Service, API keys, an encryption key, a ServiceMonitor.
func checkReplicated(t *testing.T, r *rendered) {
	cfg := agentdConfig(t, r)
	bridgeName := release + "-bridge"
	if n := replicas(r, release); n != 3 {
		t.Errorf("agentd replicas %d, want 3", n)
	}
	if n := replicas(r, bridgeName); n != 2 {
		t.Errorf("bridge replicas %d, want 2", n)
	}
	if got := lookup(cfg, "store.driver"); got != "postgres" {
		t.Errorf("store.driver %v, want postgres", got)
	}
	svc, ok := r.services[bridgeName]
	if !ok || svc.Spec.ClusterIP != corev1.ClusterIPNone {
		t.Fatalf("the bridge's Service %s is missing or not headless", bridgeName)
	}
	want := fmt.Sprintf("dns:///%s.%s.svc:%d", bridgeName, namespace, svc.Spec.Ports[0].Port)
	if got := lookup(cfg, "bridge.address"); got != want {
		t.Errorf("bridge.address %v, want %s: every bridge pod the headless Service resolves to", got, want)
	}
	bc := container(t, r, bridgeName)
	if !slices.Equal(bc.Args, []string{"bridge"}) {
		t.Errorf("the bridge's container runs %v, want agentd bridge", bc.Args)
	}
	if len(bc.EnvFrom) != 0 {
		t.Error("the bridge's container takes variables from a Secret: it needs neither the DSN nor provider keys")
	}
	if _, ok := r.configMaps[release+"-config"]; ok {
		t.Error("agentd.yaml lists API-key hashes, yet is in a ConfigMap")
	}
	if _, ok := r.secrets[release+"-config"]; !ok {
		t.Error("agentd.yaml (with API-key hashes) is not in a Secret")
	}
	c := container(t, r, release)
	dsn := false
	for _, from := range c.EnvFrom {
		if from.SecretRef != nil {
			_, dsn = r.secrets[from.SecretRef.Name].Data["AGENTD_STORE_DSN"]
		}
	}
	if !dsn {
		t.Error("agentd takes no AGENTD_STORE_DSN from a Secret")
	}
	if key := lookup(cfg, "store.encryption_key_file"); !mounted(c, key) {
		t.Errorf("store.encryption_key_file %v is not in a mounted volume", key)
	}
	if len(r.pdbs) != 2 {
		t.Errorf("%d PodDisruptionBudgets, want 2 (agentd and the bridge)", len(r.pdbs))
	}
	if len(r.serviceMonitors) != 1 {
		t.Errorf("%d ServiceMonitors, want 1", len(r.serviceMonitors))
	}
	np, ok := r.networkPolicies[bridgeName]
	if !ok {
		t.Fatal("no NetworkPolicy for the bridge")
	}
	server := labels.Set(r.deployments[release].Spec.Template.Labels)
	admitted := false
	for _, rule := range np.Spec.Ingress {
		for _, peer := range rule.From {
			if peer.PodSelector != nil && labels.SelectorFromSet(peer.PodSelector.MatchLabels).Matches(server) {
				admitted = true
			}
		}
	}
	if !admitted {
		t.Error("the bridge's NetworkPolicy does not admit agentd's pods")
	}
}

// mounted reports whether path lies in one of c's volume mounts.
func mounted(c corev1.Container, path any) bool {
	p, _ := path.(string)
	for _, m := range c.VolumeMounts {
		if p != "" && (p == m.MountPath || strings.HasPrefix(p, m.MountPath+"/")) {
			return true
		}
	}
	return false
}
