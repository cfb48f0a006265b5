package security

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki is the certificates of the tests, as PEM files in dir:
//
//	ca.pem                  the CA everything trusted is signed by
//	rogue-ca.pem            a second CA nobody trusts
//	cassandra.pem           Cassandra's keystore: RSA PKCS#8 key, certificate
//	                        (IP SANs of the nodes, DNS cassandra.test), CA
//	proxy.pem, proxy.key    the proxy's client-facing certificate (127.0.0.1,
//	                        proxy.test)
//	client.pem, client.key  a client certificate signed by ca.pem: drivers use
//	                        it against the proxy, the proxy against Cassandra
//	rogue.pem, rogue.key    a client certificate signed by rogue-ca.pem
type pki struct {
	dir string
}

func (p pki) file(name string) string { return filepath.Join(p.dir, name) }

// loadOrCreatePKI reuses the files in dir when ca.pem is there (a running
// node was started with them), and otherwise creates them.
func loadOrCreatePKI(dir string, nodeIPs []string) (pki, error) {
	p := pki{dir: dir}
	if _, err := os.Stat(p.file("ca.pem")); err == nil {
		return p, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return p, err
	}
	ca, err := newCA("cqlgate test CA")
	if err != nil {
		return p, err
	}
	rogue, err := newCA("rogue CA")
	if err != nil {
		return p, err
	}
	var ips []net.IP
	for _, s := range nodeIPs {
		ips = append(ips, net.ParseIP(s))
	}
	// Cassandra's PEM keystore: an unencrypted PKCS#8 key, then the chain.
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return p, err
	}
	cassCert, err := ca.sign(rsaKey, "cassandra", []string{"cassandra.test"}, ips, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return p, err
	}
	files := map[string][]byte{
		"ca.pem":       ca.certPEM,
		"rogue-ca.pem": rogue.certPEM,
		"cassandra.pem": append(append(keyPEM(rsaKey), pemBlock("CERTIFICATE", cassCert)...),
			ca.certPEM...),
	}
	for _, leaf := range []struct {
		name  string
		ca    *testCA
		dns   []string
		ips   []net.IP
		usage x509.ExtKeyUsage
	}{
		{"proxy", ca, []string{"proxy.test"}, []net.IP{net.IPv4(127, 0, 0, 1)}, x509.ExtKeyUsageServerAuth},
		{"client", ca, nil, nil, x509.ExtKeyUsageClientAuth},
		{"rogue", rogue, nil, nil, x509.ExtKeyUsageClientAuth},
	} {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return p, err
		}
		der, err := leaf.ca.sign(key, leaf.name, leaf.dns, leaf.ips, leaf.usage)
		if err != nil {
			return p, err
		}
		files[leaf.name+".pem"] = pemBlock("CERTIFICATE", der)
		files[leaf.name+".key"] = keyPEM(key)
	}
	// ca.pem last: its presence marks a complete set.
	for name, data := range files {
		if name != "ca.pem" {
			if err := os.WriteFile(p.file(name), data, 0o600); err != nil {
				return p, err
			}
		}
	}
	return p, os.WriteFile(p.file("ca.pem"), files["ca.pem"], 0o600)
}

type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newCA(name string) (*testCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &testCA{cert: cert, key: key, certPEM: pemBlock("CERTIFICATE", der)}, nil
}

func (ca *testCA) sign(key crypto.Signer, cn string, dns []string, ips []net.IP, usage x509.ExtKeyUsage) ([]byte, error) {
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		DNSNames:     dns,
		IPAddresses:  ips,
	}
	return x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// keyPEM encodes key as unencrypted PKCS#8 ("BEGIN PRIVATE KEY"), the form
// both Go and Cassandra's PEMBasedSslContextFactory read.
func keyPEM(key crypto.Signer) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic(fmt.Sprintf("marshal key: %v", err))
	}
	return pemBlock("PRIVATE KEY", der)
}

// clientTLS returns a client-side TLS configuration trusting caFile, with
// serverName and, if certName is not empty, the certificate certName.pem.
func (p pki) clientTLS(caFile, serverName, certName string) (*tls.Config, error) {
	pem, err := os.ReadFile(p.file(caFile))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	cfg := &tls.Config{RootCAs: pool, ServerName: serverName, MinVersion: tls.VersionTLS12}
	if certName != "" {
		cert, err := tls.LoadX509KeyPair(p.file(certName+".pem"), p.file(certName+".key"))
		if err != nil {
			return nil, err
		}
		// Always sent, even when the server asks for another CA's
		// certificates (Go would then send none).
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &cert, nil }
	}
	return cfg, nil
}
