package frame

import (
	"io"
	"time"
)

// StampedReader records when each read from the underlying reader (a
// socket) returned data. A read loop that puts a Reader on top of it times
// a burst of frames with one clock read rather than one per frame, and each
// frame's time is when its last bytes arrived rather than when the loop got
// to it.
type StampedReader struct {
	r  io.Reader
	at time.Time // with the monotonic reading, so durations ignore clock steps
}

// NewStampedReader returns a StampedReader reading from r.
func NewStampedReader(r io.Reader) *StampedReader {
	return &StampedReader{r: r, at: time.Now()}
}

func (s *StampedReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if n > 0 {
		s.at = time.Now()
	}
	return n, err
}

// At returns when the last read that returned data did. It is not
// synchronised: only the goroutine reading may call it.
func (s *StampedReader) At() time.Time { return s.at }
