package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// version is stamped at build time:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/proxy
//
// The linker writes it; nothing assigns it at run time.
var version = "dev"

// buildInfo identifies the running binary.
type buildInfo struct {
	version   string // main.version
	revision  string // VCS revision, "unknown" if not recorded; "+dirty" when modified
	time      string // VCS commit time, may be empty
	goVersion string
}

func readBuildInfo() buildInfo {
	info := buildInfo{version: version, revision: "unknown", goVersion: runtime.Version()}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return info
	}
	var modified bool
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			info.revision = s.Value
		case "vcs.time":
			info.time = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if modified && info.revision != "unknown" {
		info.revision += "+dirty"
	}
	return info
}

// versionString is what --version prints.
func versionString() string {
	info := readBuildInfo()
	s := fmt.Sprintf("cqlgate %s\nrevision: %s\n", info.version, info.revision)
	if info.time != "" {
		s += fmt.Sprintf("commit time: %s\n", info.time)
	}
	return s + fmt.Sprintf("go: %s %s/%s", info.goVersion, runtime.GOOS, runtime.GOARCH)
}

// collector exports the build as cqlgate_build_info, a gauge fixed at 1
// whose labels carry the version, following Prometheus convention.
func (b buildInfo) collector() prometheus.Collector {
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "cqlgate",
		Name:      "build_info",
		Help:      "A metric with a constant '1' value labeled by the version, revision and Go version cqlgate was built from.",
		ConstLabels: prometheus.Labels{
			"version":   b.version,
			"revision":  b.revision,
			"goversion": b.goVersion,
		},
	})
	g.Set(1)
	return g
}
