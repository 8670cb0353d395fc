package deploy

// X-O7: the agentd.yaml that the Helm chart renders (kept in testdata/ by
// tools/chartcheck, which checks them against the chart) loads with
// agentd's own configuration loader, with the environment each
// Deployment's container gets (its env, and the variables of the Secret it
// takes with envFrom), and its addresses are the ports the pods declare.

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"go.yaml.in/yaml/v3"

	"github.com/agentd/agentd/internal/config"
)

// object is the part of a rendered object this test reads.
type object struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Data map[string]string `yaml:"data"`
	Spec struct {
		Template struct {
			Spec struct {
				Containers []container `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type container struct {
	Name string   `yaml:"name"`
	Args []string `yaml:"args"`
	Env  []struct {
		Name  string `yaml:"name"`
		Value string `yaml:"value"`
	} `yaml:"env"`
	EnvFrom []struct {
		SecretRef *struct {
			Name string `yaml:"name"`
		} `yaml:"secretRef"`
	} `yaml:"envFrom"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
}

func readRendering(t *testing.T, name string) map[string]object {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	objs := map[string]object{}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	for {
		var o object
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if o.Kind != "" {
			objs[o.Kind+"/"+o.Metadata.Name] = o
		}
	}
	return objs
}

// secretValue decodes a Secret's data value.
func secretValue(t *testing.T, v string) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// load loads agentd.yaml as c would: with its env and its Secret's
// variables.
func load(t *testing.T, objs map[string]object, c container) config.Config {
	t.Helper()
	env := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.SecretRef == nil {
			continue
		}
		s, ok := objs["Secret/"+from.SecretRef.Name]
		if !ok {
			t.Fatalf("container %s: no Secret %s rendered", c.Name, from.SecretRef.Name)
		}
		for k, v := range s.Data {
			env[k] = secretValue(t, v)
		}
	}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	var text string
	if cm, ok := objs["ConfigMap/agentd-config"]; ok {
		text = cm.Data["agentd.yaml"]
	} else if s, ok := objs["Secret/agentd-config"]; ok {
		text = secretValue(t, s.Data["agentd.yaml"])
	}
	if text == "" {
		t.Fatal("no agentd.yaml rendered")
	}
	if env["AGENTD_CONFIG"] != "/etc/agentd/config/agentd.yaml" {
		t.Fatalf("container %s: AGENTD_CONFIG %q", c.Name, env["AGENTD_CONFIG"])
	}
	path := filepath.Join(t.TempDir(), "agentd.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(path, func(k string) string { return env[k] }, "/usr/local/bin/agentd")
	if err != nil {
		t.Fatalf("container %s: agentd.yaml does not load: %v\n%s", c.Name, err, text)
	}
	return cfg
}

// port is the container's port of that name.
func port(t *testing.T, c container, name string) string {
	t.Helper()
	for _, p := range c.Ports {
		if p.Name == name {
			return strconv.Itoa(p.ContainerPort)
		}
	}
	t.Fatalf("container %s declares no port %s", c.Name, name)
	return ""
}

// listensOn checks that addr is every interface on the port.
func listensOn(t *testing.T, setting, addr, want string) {
	t.Helper()
	host, p, err := net.SplitHostPort(addr)
	if err != nil || host != "0.0.0.0" || p != want {
		t.Errorf("%s %q: want 0.0.0.0:%s, the port the pod declares", setting, addr, want)
	}
}

func only(t *testing.T, objs map[string]object, deployment string) container {
	t.Helper()
	d, ok := objs["Deployment/"+deployment]
	if !ok || len(d.Spec.Template.Spec.Containers) != 1 {
		t.Fatalf("no Deployment %s with one container", deployment)
	}
	return d.Spec.Template.Spec.Containers[0]
}

func TestChartConfigSingle(t *testing.T) {
	objs := readRendering(t, "chart-single-sqlite.yaml")
	c := only(t, objs, "agentd")
	cfg := load(t, objs, c)
	listensOn(t, "listen", cfg.Listen, port(t, c, "grpc"))
	listensOn(t, "metrics.listen", cfg.Metrics.Listen, port(t, c, "metrics"))
	if cfg.Store.Driver != config.StoreSQLite || cfg.StateDir != "/var/lib/agentd" {
		t.Errorf("store %s in %s, want sqlite in /var/lib/agentd", cfg.Store.Driver, cfg.StateDir)
	}
	if cfg.Bridge.Address != "" {
		t.Errorf("bridge.address %q, want the embedded bridge", cfg.Bridge.Address)
	}
	if !cfg.Insecure || cfg.Auth.Enabled() {
		t.Error("the single values file serves unauthenticated callers (insecure)")
	}
}

func TestChartConfigReplicated(t *testing.T) {
	objs := readRendering(t, "chart-replicated-postgres.yaml")
	c := only(t, objs, "agentd")
	cfg := load(t, objs, c)
	listensOn(t, "listen", cfg.Listen, port(t, c, "grpc"))
	listensOn(t, "metrics.listen", cfg.Metrics.Listen, port(t, c, "metrics"))
	if cfg.Store.Driver != config.StorePostgres || cfg.Store.DSN == "" {
		t.Errorf("store %s, DSN set %v: want postgres with the DSN from the Secret", cfg.Store.Driver, cfg.Store.DSN != "")
	}
	if cfg.Store.EncryptionKeyFile == "" || !cfg.Auth.Enabled() {
		t.Error("want an encryption key file and API keys")
	}
	if cfg.Bridge.Address != "dns:///agentd-bridge.agentd.svc:7071" {
		t.Errorf("bridge.address %q", cfg.Bridge.Address)
	}
	b := only(t, objs, "agentd-bridge")
	bcfg := load(t, objs, b)
	listensOn(t, "bridge.listen", bcfg.Bridge.Listen, port(t, b, "grpc"))
	if bcfg.Store.DSN != "" || len(b.EnvFrom) != 0 {
		t.Error("the bridge gets the store's DSN or a Secret's variables: it needs neither")
	}
	listensOn(t, "metrics.listen", bcfg.Metrics.Listen, port(t, b, "metrics"))
	if _, p, _ := net.SplitHostPort(cfg.Bridge.Address[len("dns:///"):]); p != port(t, b, "grpc") {
		t.Errorf("bridge.address's port %s is not the bridge's port", p)
	}
}
