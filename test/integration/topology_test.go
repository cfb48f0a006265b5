package integration

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	gocql2 "github.com/apache/cassandra-gocql-driver/v2"
	"github.com/cqlgate/cqlgate/internal/proxytest"
	"github.com/gocql/gocql"
)

// TestSystemTablesShowOnlyTheProxy checks what drivers learn about the
// cluster: system.local describes the proxy (its address and port, one
// token, a stable host id), system.peers and system.peers_v2 are empty, and
// gocql's host discovery finds the proxy and nothing else.
func TestSystemTablesShowOnlyTheProxy(t *testing.T) {
	c := singleCluster.Get(t)
	p := startProxy(t, c.Addrs, nil)
	proxyAP := netip.MustParseAddrPort(p.Addr)

	var mu sync.Mutex
	seen := map[string]bool{}
	filter := func(cc *gocql.ClusterConfig) {
		cc.HostFilter = gocql.HostFilterFunc(func(h *gocql.HostInfo) bool {
			mu.Lock()
			defer mu.Unlock()
			seen[net.JoinHostPort(h.ConnectAddress().String(), strconv.Itoa(h.Port()))] = true
			return true
		})
	}
	s1 := proxySession(t, p, filter)
	s2 := proxySession(t, p, filter)

	hostIDs := map[string]bool{}
	for i, s := range []*gocql.Session{s1, s2} {
		var rpcAddr, bcastAddr net.IP
		var rpcPort int
		var tokens []string
		var hostID gocql.UUID
		err := s.Query("SELECT rpc_address, rpc_port, broadcast_address, tokens, host_id FROM system.local").
			Scan(&rpcAddr, &rpcPort, &bcastAddr, &tokens, &hostID)
		if err != nil {
			t.Fatalf("session %d: SELECT FROM system.local: %v", i, err)
		}
		if !rpcAddr.Equal(proxyAP.Addr().AsSlice()) || !bcastAddr.Equal(proxyAP.Addr().AsSlice()) {
			t.Errorf("session %d: rpc_address %v, broadcast_address %v; want the proxy's %v", i, rpcAddr, bcastAddr, proxyAP.Addr())
		}
		if rpcPort != int(proxyAP.Port()) {
			t.Errorf("session %d: rpc_port %d, want the proxy's %d", i, rpcPort, proxyAP.Port())
		}
		if len(tokens) != 1 {
			t.Errorf("session %d: tokens %v, want exactly one", i, tokens)
		}
		if hostID == (gocql.UUID{}) {
			t.Errorf("session %d: host_id is zero", i)
		}
		hostIDs[hostID.String()] = true

		// The query drivers run, with every column.
		row := map[string]any{}
		if err := s.Query("SELECT * FROM system.local WHERE key='local'").MapScan(row); err != nil {
			t.Fatalf("session %d: SELECT * FROM system.local: %v", i, err)
		}
		for _, col := range []string{"rpc_address", "broadcast_address", "listen_address"} {
			if fmt.Sprint(row[col]) != proxyAP.Addr().String() {
				t.Errorf("session %d: SELECT *: %s = %v, want %v", i, col, row[col], proxyAP.Addr())
			}
		}
		if id, _ := row["host_id"].(gocql.UUID); id != hostID {
			t.Errorf("session %d: SELECT *: host_id %v, want %v as in the other query", i, row["host_id"], hostID)
		}
		if toks, _ := row["tokens"].([]string); len(toks) != 1 {
			t.Errorf("session %d: SELECT *: tokens %v, want exactly one", i, row["tokens"])
		}
		for _, peers := range []string{"system.peers", "system.peers_v2"} {
			iter := s.Query("SELECT * FROM " + peers).Iter()
			n := iter.NumRows()
			if err := iter.Close(); err != nil {
				t.Fatalf("session %d: SELECT FROM %s: %v", i, peers, err)
			}
			if n != 0 {
				t.Errorf("session %d: %s has %d rows, want 0", i, peers, n)
			}
		}
	}
	if len(hostIDs) != 1 {
		t.Errorf("host_id differs between sessions: %v, want one stable id", hostIDs)
	}

	// cassandra-gocql-driver/v2 on v5 prepares these queries and executes
	// them with skip_metadata; the answers must still be the proxy's.
	s5 := newSession2(t, p.Addr, nil)
	for i := 0; i < 5; i++ {
		var rpcAddr net.IP
		var rpcPort int
		if err := s5.Query("SELECT rpc_address, rpc_port FROM system.local WHERE key = ?", "local").Scan(&rpcAddr, &rpcPort); err != nil {
			t.Fatalf("v5 driver: SELECT FROM system.local: %v", err)
		}
		if !rpcAddr.Equal(proxyAP.Addr().AsSlice()) || rpcPort != int(proxyAP.Port()) {
			t.Errorf("v5 driver, execution %d: system.local says %v:%d, want the proxy %s", i, rpcAddr, rpcPort, p.Addr)
		}
		iter := s5.Query("SELECT peer, rpc_address FROM system.peers").Iter()
		n := iter.NumRows()
		if err := iter.Close(); err != nil {
			t.Fatalf("v5 driver: SELECT FROM system.peers: %v", err)
		}
		if n != 0 {
			t.Errorf("v5 driver, execution %d: system.peers has %d rows, want 0", i, n)
		}
	}

	// A raw v5 client gets the same.
	r := dialRaw(t, p.Addr, 5)
	r.startup(nil)
	rs := r.mustRows("SELECT rpc_address, rpc_port FROM system.local")
	if len(rs.rows) != 1 {
		t.Fatalf("v5 system.local: %d rows, want 1", len(rs.rows))
	}
	if got := rs.rows[0][0]; !bytes.Equal(got, proxyAP.Addr().AsSlice()) {
		t.Errorf("v5 system.local rpc_address: got %x, want %x", got, proxyAP.Addr().AsSlice())
	}
	if got := rs.rows[0][1]; len(got) != 4 || binary.BigEndian.Uint32(got) != uint32(proxyAP.Port()) {
		t.Errorf("v5 system.local rpc_port: got %x, want %d", got, proxyAP.Port())
	}
	for _, peers := range []string{"system.peers", "system.peers_v2"} {
		if rs := r.mustRows("SELECT * FROM " + peers); len(rs.rows) != 0 {
			t.Errorf("v5 %s: %d rows, want 0", peers, len(rs.rows))
		}
	}

	// gocql builds the HostInfo of system.local's row with its default port
	// (9042: it reads no port column there), then merges it by host_id into
	// the host it connected to, so only addresses are compared here; which
	// ports drivers dial is checked by TestClientConnectsOnlyToTheProxy.
	mu.Lock()
	defer mu.Unlock()
	if !seen[p.Addr] {
		t.Errorf("gocql discovered hosts %v, want the proxy %s among them", seen, p.Addr)
	}
	for h := range seen {
		if ap := netip.MustParseAddrPort(h); ap.Addr() != proxyAP.Addr() {
			t.Errorf("gocql discovered host %s, want only the proxy's address %s", h, proxyAP.Addr())
		}
	}
}

// TestClientConnectsOnlyToTheProxy checks at the socket level that drivers
// talking to the proxy open connections to the proxy and never to a
// Cassandra node.
//
// Method: the proxy runs as a separate process (this test binary re-executed
// in proxy mode, see runProxyChild), so every TCP socket this process opens
// belongs to the drivers. The sockets of a process are the "socket:[inode]"
// links in /proc/PID/fd; /proc/PID/net/tcp{,6} list the network namespace's
// TCP sockets with their inode, addresses and state. Sockets this process
// already had before the drivers started are left out, so that anything
// left behind by other tests cannot be mistaken for the drivers'. The same
// inspection of the proxy process must find its connections to Cassandra,
// which shows the method sees such connections when they exist.
func TestClientConnectsOnlyToTheProxy(t *testing.T) {
	c := singleCluster.Get(t)
	proxyAddr, proxyPid := startProxyProcess(t, c.Addrs)
	nodeIPs := map[netip.Addr]bool{}
	for _, h := range c.Hosts {
		nodeIPs[netip.MustParseAddr(h)] = true
	}
	self := strconv.Itoa(os.Getpid())
	before, err := socketInodes(self)
	if err != nil {
		t.Fatal(err)
	}

	s := newSession(t, []string{proxyAddr}, nil)
	cc2 := gocql2.NewCluster(proxyAddr)
	s2, err := cc2.CreateSession()
	if err != nil {
		t.Fatalf("cassandra-gocql-driver/v2 session: %v", err)
	}
	t.Cleanup(s2.Close)
	for i := 0; i < 50; i++ {
		var rv string
		if err := s.Query("SELECT release_version FROM system.local WHERE key = ?", "local").Scan(&rv); err != nil {
			t.Fatalf("gocql query %d: %v", i, err)
		}
		if err := s2.Query("SELECT release_version FROM system.local WHERE key = ?", "local").Scan(&rv); err != nil {
			t.Fatalf("cassandra-gocql-driver/v2 query %d: %v", i, err)
		}
	}
	// Give the drivers' background pool fillers and host discovery time to
	// dial whatever they would dial.
	time.Sleep(2 * time.Second)

	conns, err := processTCP(self)
	if err != nil {
		t.Fatal(err)
	}
	toProxy := 0
	for _, tc := range conns {
		if before[tc.inode] || tc.state == tcpListen {
			continue
		}
		switch {
		case nodeIPs[tc.remote.Addr()]:
			t.Errorf("the client process has a TCP connection %s -> %s (state %s) to a Cassandra node", tc.local, tc.remote, tc.state)
		case tc.remote.String() != proxyAddr:
			t.Errorf("the client process has a TCP connection %s -> %s (state %s), want connections to the proxy %s only", tc.local, tc.remote, tc.state, proxyAddr)
		case tc.state == tcpEstablished:
			toProxy++
		}
	}
	// gocql opens a control connection and a pool (2 connections per host
	// by default); the v2 driver as many.
	if toProxy < 4 {
		t.Errorf("the client process has %d established connections to the proxy %s, want at least 4", toProxy, proxyAddr)
	}

	// Positive control: the proxy process is connected to the nodes.
	pconns, err := processTCP(strconv.Itoa(proxyPid))
	if err != nil {
		t.Fatal(err)
	}
	toNodes := 0
	for _, tc := range pconns {
		if nodeIPs[tc.remote.Addr()] && tc.state == tcpEstablished {
			toNodes++
		}
	}
	if toNodes == 0 {
		t.Errorf("found no connection from the proxy process to Cassandra: the /proc inspection is broken")
	}
}

// startProxyProcess runs a proxy in a child process (this test binary in
// proxy mode) and returns its address and pid. It is stopped at the end of
// the test.
func startProxyProcess(t *testing.T, contactPoints []string) (string, int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), proxyChildEnv+"="+strings.Join(contactPoints, ","))
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr proxytest.SyncBuffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start proxy process: %v", err)
	}
	exited := make(chan error, 1)
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "LISTEN "); ok {
				addrc <- a
			}
		}
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("proxy process: %v\n%s", err, stderr.String())
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
			t.Errorf("proxy process did not exit within 30s of its stdin closing")
		}
	})
	select {
	case a := <-addrc:
		return a, cmd.Process.Pid
	case err := <-exited:
		t.Fatalf("proxy process exited before serving: %v\n%s", err, stderr.String())
	case <-time.After(90 * time.Second):
		t.Fatalf("proxy process not serving after 90s\n%s", stderr.String())
	}
	return "", 0
}

const (
	tcpEstablished = "01"
	tcpListen      = "0A"
)

type tcpSocket struct {
	local, remote netip.AddrPort
	state         string // hex code of the kernel's TCP state
	inode         uint64
}

// socketInodes returns the inodes of the sockets process pid has open.
func socketInodes(pid string) (map[uint64]bool, error) {
	dir := filepath.Join("/proc", pid, "fd")
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := map[uint64]bool{}
	for _, e := range ents {
		l, err := os.Readlink(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		if s, ok := strings.CutPrefix(l, "socket:["); ok {
			if n, err := strconv.ParseUint(strings.TrimSuffix(s, "]"), 10, 64); err == nil {
				out[n] = true
			}
		}
	}
	return out, nil
}

// processTCP returns the TCP sockets (IPv4 and IPv6) owned by process pid.
func processTCP(pid string) ([]tcpSocket, error) {
	inodes, err := socketInodes(pid)
	if err != nil {
		return nil, err
	}
	var out []tcpSocket
	for _, f := range []string{"tcp", "tcp6"} {
		data, err := os.ReadFile(filepath.Join("/proc", pid, "net", f))
		if err != nil {
			if f == "tcp6" && os.IsNotExist(err) {
				continue
			}
			return nil, err
		}
		lines := strings.Split(strings.TrimSpace(string(data)), "\n")
		for _, line := range lines[1:] {
			fs := strings.Fields(line)
			if len(fs) < 10 {
				return nil, fmt.Errorf("%s: short line %q", f, line)
			}
			inode, err := strconv.ParseUint(fs[9], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("%s: inode in %q: %v", f, line, err)
			}
			if !inodes[inode] {
				continue
			}
			local, err1 := parseProcAddr(fs[1])
			remote, err2 := parseProcAddr(fs[2])
			if err1 != nil || err2 != nil {
				return nil, fmt.Errorf("%s: addresses in %q: %v %v", f, line, err1, err2)
			}
			out = append(out, tcpSocket{local: local, remote: remote, state: fs[3], inode: inode})
		}
	}
	return out, nil
}

// parseProcAddr decodes an address of /proc/net/tcp{,6}: the IP as 32-bit
// words in host (little-endian) order, then ":" and the port in hex.
func parseProcAddr(s string) (netip.AddrPort, error) {
	ipHex, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	raw, err := hex.DecodeString(ipHex)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.AddrPort{}, fmt.Errorf("bad address %q", s)
	}
	for i := 0; i < len(raw); i += 4 {
		raw[i], raw[i+1], raw[i+2], raw[i+3] = raw[i+3], raw[i+2], raw[i+1], raw[i]
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return netip.AddrPort{}, fmt.Errorf("bad port in %q", s)
	}
	ip, _ := netip.AddrFromSlice(raw)
	return netip.AddrPortFrom(ip.Unmap(), uint16(port)), nil
}
