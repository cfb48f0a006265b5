package proxy

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/gocql/gocql"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/cqlgate/cqlgate/pkg/config"
)

func TestDevSmoke(t *testing.T) {
	addr := os.Getenv("DEV_CASSANDRA")
	if addr == "" {
		t.Skip("DEV_CASSANDRA unset")
	}
	cfg := config.Default()
	cfg.Listen = []string{"127.0.0.1:0"}
	cfg.ContactPoints = []string{addr}
	log, _ := zap.NewDevelopment()
	p, err := New(cfg, log, prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx) }()
	select {
	case <-p.Serving():
	case err := <-done:
		t.Fatal(err)
	}
	defer func() { cancel(); <-done }()
	pa := p.Addrs()[0].String()
	t.Logf("proxy at %s", pa)
	cc := gocql.NewCluster(pa)
	cc.Timeout = 5 * time.Second
	s, err := cc.CreateSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var rv string
	if err := s.Query("SELECT release_version FROM system.local").Scan(&rv); err != nil {
		t.Fatal(err)
	}
	t.Logf("release_version %s", rv)
	if err := s.Query("CREATE KEYSPACE IF NOT EXISTS smoke WITH replication = {'class':'SimpleStrategy','replication_factor':1}").Exec(); err != nil {
		t.Fatal(err)
	}
	if err := s.Query("CREATE TABLE IF NOT EXISTS smoke.kv (k int PRIMARY KEY, v text)").Exec(); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 100; i++ {
		if err := s.Query("INSERT INTO smoke.kv (k, v) VALUES (?, ?)", i, "x").Exec(); err != nil {
			t.Fatal(err)
		}
	}
	var n int
	if err := s.Query("SELECT count(*) FROM smoke.kv").Scan(&n); err != nil {
		t.Fatal(err)
	}
	t.Logf("count %d", n)
}
