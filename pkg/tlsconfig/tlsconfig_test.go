package tlsconfig

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// writePair writes a self-signed certificate for 127.0.0.1 named cn, and
// its key, to dir/name.pem and dir/name.key.
func writePair(t *testing.T, dir, name, cn string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{cn},
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		IsCA:                  true,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(file string, typ string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, file), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(name+".pem", "CERTIFICATE", der)
	write(name+".key", "PRIVATE KEY", kder)
}

func commonName(t *testing.T, c *tls.Certificate) string {
	t.Helper()
	x, err := x509.ParseCertificate(c.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return x.Subject.CommonName
}

func TestServerReloadsChangedPair(t *testing.T) {
	dir := t.TempDir()
	writePair(t, dir, "s", "first")
	cfg, err := Server(ServerFiles{CertFile: filepath.Join(dir, "s.pem"), KeyFile: filepath.Join(dir, "s.key")})
	if err != nil {
		t.Fatal(err)
	}
	c, _ := cfg.GetCertificate(nil)
	if got := commonName(t, c); got != "first" {
		t.Fatalf("certificate %q, want first", got)
	}
	// A certificate replaced before its key: the old pair stays in use.
	writePair(t, dir, "other", "second")
	if err := os.Rename(filepath.Join(dir, "other.pem"), filepath.Join(dir, "s.pem")); err != nil {
		t.Fatal(err)
	}
	c, _ = cfg.GetCertificate(nil)
	if got := commonName(t, c); got != "first" {
		t.Fatalf("with a mismatched pair: certificate %q, want first still", got)
	}
	if err := os.Rename(filepath.Join(dir, "other.key"), filepath.Join(dir, "s.key")); err != nil {
		t.Fatal(err)
	}
	c, _ = cfg.GetCertificate(nil)
	if got := commonName(t, c); got != "second" {
		t.Fatalf("after rotation: certificate %q, want second", got)
	}
}

func TestServerErrors(t *testing.T) {
	dir := t.TempDir()
	writePair(t, dir, "s", "s")
	if _, err := Server(ServerFiles{CertFile: filepath.Join(dir, "s.pem")}); err == nil {
		t.Error("no error without a key file")
	}
	if _, err := Server(ServerFiles{CertFile: filepath.Join(dir, "s.pem"), KeyFile: filepath.Join(dir, "nope")}); err == nil {
		t.Error("no error with a missing key file")
	}
	_, err := Server(ServerFiles{CertFile: filepath.Join(dir, "s.pem"), KeyFile: filepath.Join(dir, "s.key"), ClientCAFile: filepath.Join(dir, "s.key")})
	if err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("a key as CA file: %v", err)
	}
	cfg, err := Server(ServerFiles{CertFile: filepath.Join(dir, "s.pem"), KeyFile: filepath.Join(dir, "s.key"), ClientCAFile: filepath.Join(dir, "s.pem")})
	if err != nil || cfg.ClientAuth != tls.RequireAndVerifyClientCert || cfg.MinVersion != tls.VersionTLS12 {
		t.Errorf("mutual TLS config %v, %v", cfg, err)
	}
}

func TestClientAndForAddr(t *testing.T) {
	dir := t.TempDir()
	writePair(t, dir, "c", "client")
	if _, err := Client(ClientFiles{CertFile: filepath.Join(dir, "c.pem")}); err == nil {
		t.Error("no error for a certificate without its key")
	}
	cfg, err := Client(ClientFiles{CAFile: filepath.Join(dir, "c.pem"), CertFile: filepath.Join(dir, "c.pem"), KeyFile: filepath.Join(dir, "c.key")})
	if err != nil {
		t.Fatal(err)
	}
	if c, _ := cfg.GetClientCertificate(nil); commonName(t, c) != "client" {
		t.Error("client certificate not loaded")
	}
	if got := ForAddr(cfg, "10.1.2.3:9042"); got.ServerName != "10.1.2.3" || cfg.ServerName != "" {
		t.Errorf("ForAddr server name %q (original now %q)", got.ServerName, cfg.ServerName)
	}
	named, _ := Client(ClientFiles{ServerName: "cassandra.example"})
	if ForAddr(named, "10.1.2.3:9042") != named {
		t.Error("ForAddr copied a config that names its server")
	}
}

// TestHandshake runs both sides over loopback: the client checks the
// server's IP SAN, the server requires the client's certificate.
func TestHandshake(t *testing.T) {
	dir := t.TempDir()
	writePair(t, dir, "s", "server")
	writePair(t, dir, "c", "client")
	scfg, err := Server(ServerFiles{CertFile: filepath.Join(dir, "s.pem"), KeyFile: filepath.Join(dir, "s.key"), ClientCAFile: filepath.Join(dir, "c.pem")})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				c := Conn{tls.Server(nc, scfg)}
				defer c.Close()
				buf := make([]byte, 1)
				if _, err := c.Read(buf); err == nil {
					c.Write(buf)
				}
			}()
		}
	}()
	dial := func(cc ClientFiles) error {
		cfg, err := Client(cc)
		if err != nil {
			return err
		}
		conn, err := tls.Dial("tcp", ln.Addr().String(), ForAddr(cfg, ln.Addr().String()))
		if err != nil {
			return err
		}
		defer conn.Close()
		conn.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := conn.Write([]byte{'x'}); err != nil {
			return err
		}
		_, err = conn.Read(make([]byte, 1))
		return err
	}
	good := ClientFiles{CAFile: filepath.Join(dir, "s.pem"), CertFile: filepath.Join(dir, "c.pem"), KeyFile: filepath.Join(dir, "c.key")}
	if err := dial(good); err != nil {
		t.Fatalf("good client: %v", err)
	}
	noCert := ClientFiles{CAFile: filepath.Join(dir, "s.pem")}
	if err := dial(noCert); err == nil || !strings.Contains(err.Error(), "certificate required") {
		t.Errorf("client without certificate: %v", err)
	}
	wrongCA := ClientFiles{CAFile: filepath.Join(dir, "c.pem"), CertFile: filepath.Join(dir, "c.pem"), KeyFile: filepath.Join(dir, "c.key")}
	if err := dial(wrongCA); err == nil || !strings.Contains(err.Error(), "unknown authority") {
		t.Errorf("client trusting another CA: %v", err)
	}
	wrongName := good
	wrongName.ServerName = "other"
	if err := dial(wrongName); err == nil || !strings.Contains(err.Error(), "not other") {
		t.Errorf("client expecting another name: %v", err)
	}
}
