package deploy

import (
	"encoding/json"
	"os/exec"
	"strings"
	"testing"

	"github.com/cqlgate/cqlgate/pkg/config"
)

// TestBinaryVersion checks that the version given at build time (-X
// main.version, as `make build` and the Dockerfile pass it) is what
// --version prints.
func TestBinaryVersion(t *testing.T) {
	proxyBin, _ := bins.get(t)
	out, err := exec.Command(proxyBin, "--version").CombinedOutput()
	if err != nil {
		t.Fatalf("cqlgate --version: %v\n%s", err, out)
	}
	if first, _, _ := strings.Cut(string(out), "\n"); first != "cqlgate "+testVersion {
		t.Errorf("cqlgate --version printed %q first, want %q", first, "cqlgate "+testVersion)
	}
}

// secretEnv sets every secret setting to a recognizable value through the
// environment (with the companions the configuration requires), so that a
// test can look for it where it must not appear.
func secretEnv(t *testing.T) (env []string, secrets []string) {
	t.Helper()
	for _, f := range config.Fields() {
		if !f.Secret {
			continue
		}
		v := "s3cr3t-" + strings.ToLower(f.Env)
		env = append(env, f.Env+"="+v)
		secrets = append(secrets, v)
		// A password needs its user.
		if user, ok := strings.CutSuffix(f.Env, "_PASSWORD"); ok {
			env = append(env, user+"_USERNAME=cassandra")
		}
	}
	return env, secrets
}

// TestBinaryLogs runs the proxy with JSON logs and every secret setting set,
// and checks that each log line is a JSON object with a level, a time and a
// message, that the startup line carries the settings with the secrets
// redacted, that no secret appears anywhere in the log or on /metrics, and
// that the metrics page carries the build's version.
func TestBinaryLogs(t *testing.T) {
	c := single.Get(t)
	env, secrets := secretEnv(t)
	b := startBinary(t, env, "--contact-points", c.Addrs[0], "--log-level", "info")
	exercise(t, b.CQLAddr)
	_, page := httpGet(b.AdminURL + "/metrics")
	if !strings.Contains(string(page), `version="`+testVersion+`"`) {
		t.Errorf("/metrics has no cqlgate_build_info with version %q", testVersion)
	}
	for _, s := range secrets {
		if strings.Contains(b.logs.String(), s) || strings.Contains(string(page), s) {
			t.Errorf("the secret %q appears in the log or on /metrics", s)
		}
	}

	var started bool
	for _, line := range strings.Split(strings.TrimSpace(b.logs.String()), "\n") {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Errorf("log line is not JSON: %s", line)
			continue
		}
		for _, k := range []string{"level", "ts", "msg"} {
			if _, ok := rec[k]; !ok {
				t.Errorf("log line has no %q: %s", k, line)
			}
		}
		if rec["level"] == "debug" {
			t.Errorf("a debug line at --log-level info: %s", line)
		}
		if rec["msg"] != "starting cqlgate" {
			continue
		}
		started = true
		cfg, _ := rec["config"].(map[string]any)
		for _, f := range config.Fields() {
			if f.Secret && f.YAML != "" && cfg[f.Key()] != "<redacted>" {
				t.Errorf("startup line shows %s as %v, want <redacted>", f.Key(), cfg[f.Key()])
			}
		}
		if rec["version"] != testVersion {
			t.Errorf("startup line has version %v, want %s", rec["version"], testVersion)
		}
	}
	if !started {
		t.Errorf("no \"starting cqlgate\" line in the log:\n%s", b.logs)
	}
}

// TestBinaryConsoleLogs checks the development format: human-readable
// lines, not JSON, and that a configuration error names the flag and leaks
// no secret.
func TestBinaryConsoleLogs(t *testing.T) {
	proxyBin, _ := bins.get(t)
	env, secrets := secretEnv(t)
	cmd := exec.Command(proxyBin, "--contact-points", "127.0.0.1:9042", "--log-format", "console", "--queue-max-wait", "0s")
	cmd.Env = append(cleanEnv(), env...)
	out, err := cmd.CombinedOutput()
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 2 {
		t.Fatalf("cqlgate with a bad setting: %v, want exit status 2\n%s", err, out)
	}
	if !strings.Contains(string(out), "--queue-max-wait") {
		t.Errorf("the configuration error does not name the flag:\n%s", out)
	}
	for _, s := range secrets {
		if strings.Contains(string(out), s) {
			t.Errorf("the secret %q appears in the configuration error", s)
		}
	}

	// A proxy that starts (and fails to reach a closed port) logs in the
	// console format.
	cmd = exec.Command(proxyBin, "--contact-points", "127.0.0.1:1", "--connect-timeout", "1s",
		"--log-format", "console", "--admin-listen", "127.0.0.1:0", "--listen", "127.0.0.1:0")
	cmd.Env = cleanEnv()
	out, _ = cmd.CombinedOutput()
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if strings.HasPrefix(first, "{") || !strings.Contains(first, "INFO") || !strings.Contains(first, "starting cqlgate") {
		t.Errorf("console log's first line %q: want a human-readable INFO line", first)
	}
}
