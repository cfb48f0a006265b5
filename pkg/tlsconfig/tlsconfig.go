// Package tlsconfig builds the *tls.Config values of cqlgate's two TLS sides
// from PEM files: the client-facing listener (Server) and the connections to
// Cassandra (Client).
//
// Certificates and keys are re-read when their files change, so a rotated
// certificate (cert-manager, a renewed Kubernetes secret) is picked up by the
// next handshake without a restart; CA files are read once. A pair that fails
// to load after a change (say the certificate was replaced before its key)
// leaves the previous one in use until both files agree again.
//
// Both sides accept TLS 1.2 and 1.3 only, like Cassandra 5.0.
// It must not log or expose key material, and it imports nothing of the
// project.
package tlsconfig

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"
)

// ServerFiles names the files of the client-facing TLS listener.
type ServerFiles struct {
	// CertFile and KeyFile hold the proxy's certificate (chain) and its
	// private key, in PEM. Both are required.
	CertFile, KeyFile string
	// ClientCAFile, when set, holds the CA certificates client certificates
	// must chain to; every client must then present one (mutual TLS).
	ClientCAFile string
}

// ClientFiles describes how the proxy checks Cassandra's certificates and
// which certificate, if any, it presents.
type ClientFiles struct {
	// CAFile holds the CA certificates the nodes' certificates must chain
	// to; empty uses the system's roots.
	CAFile string
	// ServerName is the name checked against every node's certificate;
	// empty checks the host each node is dialled at (an IP address for
	// discovered nodes), see ForAddr.
	ServerName string
	// CertFile and KeyFile, both or neither, are the client certificate
	// presented to nodes that require one (require_client_auth).
	CertFile, KeyFile string
	// InsecureSkipVerify accepts any certificate: the connection is
	// encrypted but not authenticated, open to a man in the middle.
	InsecureSkipVerify bool
}

// Server returns the configuration of the client-facing listener.
func Server(f ServerFiles) (*tls.Config, error) {
	if f.CertFile == "" || f.KeyFile == "" {
		return nil, errors.New("tls: a certificate file and a key file are both required")
	}
	kp, err := newKeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion: tls.VersionTLS12,
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return kp.get(), nil
		},
	}
	if f.ClientCAFile != "" {
		pool, err := loadCAs(f.ClientCAFile)
		if err != nil {
			return nil, err
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// Client returns the configuration of connections to Cassandra. Its
// ServerName is f.ServerName; pass it through ForAddr before each dial.
func Client(f ClientFiles) (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         f.ServerName,
		InsecureSkipVerify: f.InsecureSkipVerify,
	}
	if f.CAFile != "" {
		pool, err := loadCAs(f.CAFile)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	switch {
	case f.CertFile != "" && f.KeyFile != "":
		kp, err := newKeyPair(f.CertFile, f.KeyFile)
		if err != nil {
			return nil, err
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return kp.get(), nil
		}
	case f.CertFile != "" || f.KeyFile != "":
		return nil, errors.New("tls: a client certificate needs both a certificate file and a key file")
	}
	return cfg, nil
}

// ForAddr returns cfg for a connection to addr (host:port): cfg itself when
// it names a server or skips verification, otherwise a copy whose ServerName
// is addr's host, so each node's certificate is checked against the address
// it is dialled at (its IP SAN for discovered nodes), as tls.Dial does.
func ForAddr(cfg *tls.Config, addr string) *tls.Config {
	if cfg.ServerName != "" || cfg.InsecureSkipVerify {
		return cfg
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	c := cfg.Clone()
	c.ServerName = host
	return c
}

// Conn is a TLS connection whose Close closes the socket at once, without
// the close_notify alert tls.Conn.Close sends first: that write can block
// for seconds on a peer that stopped reading (a dead node, a stuck client),
// and it would block whichever goroutine closes the connection. CQL's own
// framing already tells a truncated stream from a complete one.
type Conn struct{ *tls.Conn }

// Close closes the underlying connection.
func (c Conn) Close() error { return c.NetConn().Close() }

func loadCAs(file string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("tls: reading CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("tls: CA file %s holds no PEM certificate", file)
	}
	return pool, nil
}

// keyPair is a certificate and key loaded from two files and re-loaded when
// either file changes: another file in its place (a rename, a swapped
// Kubernetes secret), or another size or modification time. Checking costs
// two stat calls per handshake, small next to the handshake's own
// cryptography.
type keyPair struct {
	certFile, keyFile string

	mu      sync.Mutex
	cert    *tls.Certificate
	certSig fileSig
	keySig  fileSig
}

// fileSig is what tells a changed file from an unchanged one. The file's
// identity (device and inode, through os.SameFile) catches a file renamed
// into place within the same modification-time tick as the one it
// replaces, with the same size: a freshly issued pair often is.
type fileSig struct {
	fi      os.FileInfo
	size    int64
	modTime time.Time
}

func (s fileSig) same(o fileSig) bool {
	return s.size == o.size && s.modTime.Equal(o.modTime) && os.SameFile(s.fi, o.fi)
}

func newKeyPair(certFile, keyFile string) (*keyPair, error) {
	kp := &keyPair{certFile: certFile, keyFile: keyFile}
	if err := kp.load(); err != nil {
		return nil, err
	}
	return kp, nil
}

func stat(file string) (fileSig, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return fileSig{}, err
	}
	return fileSig{fi, fi.Size(), fi.ModTime()}, nil
}

// load reads both files; on error the pair in use is kept. It is called
// with kp.mu held, or before kp is shared.
func (kp *keyPair) load() error {
	cs, err := stat(kp.certFile)
	if err != nil {
		return fmt.Errorf("tls: certificate file: %w", err)
	}
	ks, err := stat(kp.keyFile)
	if err != nil {
		return fmt.Errorf("tls: key file: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(kp.certFile, kp.keyFile)
	if err != nil {
		return fmt.Errorf("tls: loading %s and %s: %w", kp.certFile, kp.keyFile, err)
	}
	kp.cert, kp.certSig, kp.keySig = &cert, cs, ks
	return nil
}

// get returns the current pair, reloading it first if a file changed.
func (kp *keyPair) get() *tls.Certificate {
	kp.mu.Lock()
	defer kp.mu.Unlock()
	cs, err1 := stat(kp.certFile)
	ks, err2 := stat(kp.keyFile)
	if err1 == nil && err2 == nil && (!cs.same(kp.certSig) || !ks.same(kp.keySig)) {
		_ = kp.load() // a half-written pair: keep the old one, retry next time
	}
	return kp.cert
}
