package driver

import (
	"context"

	"github.com/gocql/gocql"
)

// Workload describes what the workers do. A Workload is shared by all
// workers and must be safe for concurrent use; per-worker state (random
// source, buffers) lives in the Worker it hands out.
type Workload interface {
	// Name is the label in reports.
	Name() string
	// NewWorker returns the state of worker id. It is called once per
	// worker per measurement.
	NewWorker(id int) Worker
}

// Worker performs one operation per Do call. It is used by one goroutine
// at a time (the open loop hands it from one sending goroutine to the
// next through a channel).
type Worker interface {
	Do(ctx context.Context, s *gocql.Session) error
}
