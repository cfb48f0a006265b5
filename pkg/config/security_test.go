package config

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestSecuritySettingsLoad(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"c.pem", "k.pem", "ca.pem"} {
		if err := os.WriteFile(filepath.Join(dir, f), []byte("x"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	file := writeFile(t, "client_auth: PassThrough\nbackend_username: proxy\nbackend_password: from-file\nbackend_tls: true\nbackend_tls_ca_file: "+filepath.Join(dir, "ca.pem")+"\n")
	cfg := mustLoad(t, []string{"--contact-points=a", "--config=" + file, "--listen=0.0.0.0:9042", "--advertise-address=10.0.0.5",
		"--tls-cert-file=" + filepath.Join(dir, "c.pem"), "--tls-key-file=" + filepath.Join(dir, "k.pem"), "--auth-cache-ttl=30s"},
		[]string{"CQLGATE_BACKEND_PASSWORD=from-env"})
	if cfg.ClientAuth != ClientAuthPassthrough || cfg.BackendUsername != "proxy" || cfg.BackendPassword != "from-env" ||
		!cfg.BackendTLS || cfg.AuthCacheTTL.String() != "30s" {
		t.Errorf("loaded %+v", cfg)
	}
	safe := cfg.LogSafe()
	if v := safe["backend_password"]; v == "from-env" || v == nil {
		t.Errorf("LogSafe backend_password = %v, want it masked", v)
	}
	for _, f := range Fields() {
		if f.Name == "BackendPassword" && !f.Secret {
			t.Error("BackendPassword is not marked secret")
		}
	}
}

func TestSecurityValidation(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.pem")
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"none on all interfaces", []string{"--listen=0.0.0.0:9042", "--advertise-address=10.0.0.5"}, []string{
			"--client-auth: none is only allowed when every --listen address is loopback, and 0.0.0.0:9042 is not"}},
		{"none on a second address", []string{"--listen=127.0.0.1:9042,10.0.0.5:9042"}, []string{
			"--client-auth: none is only allowed when every --listen address is loopback, and 10.0.0.5:9042 is not"}},
		{"unknown mode", []string{"--client-auth=ldap"}, []string{`--client-auth: must be none or passthrough, got "ldap"`}},
		{"passthrough without backend login", []string{"--client-auth=passthrough"}, []string{
			"--client-auth: passthrough needs the proxy's own login", "$CQLGATE_BACKEND_PASSWORD"}},
		{"username without password", []string{"--backend-username=u"}, []string{"--backend-password: required with --backend-username"}},
		{"password without username", []string{"--backend-password=p"}, []string{"--backend-username: required when a backend password is set"}},
		{"negative ttl", []string{"--auth-cache-ttl=-1s"}, []string{"--auth-cache-ttl: must not be negative"}},
		{"cert without key", []string{"--tls-cert-file=" + missing}, []string{"--tls-key-file: required with --tls-cert-file"}},
		{"client CA without cert", []string{"--tls-client-ca-file=" + missing}, []string{"--tls-client-ca-file: needs --tls-cert-file"}},
		{"backend options without backend TLS", []string{"--backend-tls-ca-file=" + missing, "--backend-tls-insecure-skip-verify"}, []string{
			"--backend-tls-ca-file: has no effect without --backend-tls", "--backend-tls-insecure-skip-verify: has no effect without --backend-tls"}},
		{"insecure with a CA", []string{"--backend-tls", "--backend-tls-ca-file=" + missing, "--backend-tls-insecure-skip-verify"}, []string{
			"--backend-tls-insecure-skip-verify: conflicts with --backend-tls-ca-file"}},
		{"backend key without cert", []string{"--backend-tls", "--backend-tls-key-file=" + missing}, []string{
			"--backend-tls-cert-file: required with --backend-tls-key-file"}},
		{"missing file", []string{"--backend-tls", "--backend-tls-ca-file=" + missing}, []string{
			"--backend-tls-ca-file: stat " + missing + ": no such file or directory"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Load(append(slices.Clone(minimal), tt.args...), nil, &bytes.Buffer{})
			if err == nil {
				t.Fatal("no error")
			}
			msg, pos := err.Error(), 0
			for _, want := range tt.want {
				i := strings.Index(msg[pos:], want)
				if i < 0 {
					t.Fatalf("error\n%s\ndoes not contain (in order)\n%s", msg, want)
				}
				pos += i + len(want)
			}
		})
	}
}

func TestClientAuthNoneOnLoopback(t *testing.T) {
	for _, listen := range []string{"127.0.0.1:9042", "127.1.2.3:9042", "[::1]:9042", "localhost:9042"} {
		args := append(slices.Clone(minimal), "--listen="+listen)
		if listen == "localhost:9042" {
			args = append(args, "--advertise-address=127.0.0.1")
		}
		if _, err := Load(args, nil, &bytes.Buffer{}); err != nil {
			t.Errorf("--listen=%s with --client-auth none: %v", listen, err)
		}
	}
}
