package frame

import (
	"bytes"
	"io"
	"testing"
	"time"
)

// A burst of frames read in one read shares that read's time; the next read
// moves it on.
func TestStampedReaderTimesEachRead(t *testing.T) {
	var wire bytes.Buffer
	for i := 0; i < 3; i++ {
		wire.Write(AppendOptions(nil, V4, int16(i)))
	}
	pr, pw := io.Pipe()
	in := NewStampedReader(pr)
	r := NewReader(in, 0)
	go func() {
		pw.Write(wire.Bytes())
		time.Sleep(20 * time.Millisecond)
		pw.Write(AppendOptions(nil, V4, 3))
		pw.Close()
	}()
	var first time.Time
	for i := 0; i < 3; i++ {
		b, err := r.ReadFrame()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		b.Release()
		if i == 0 {
			first = in.At()
		} else if !in.At().Equal(first) {
			t.Fatalf("frame %d of the first read stamped %v, want %v", i, in.At(), first)
		}
	}
	b, err := r.ReadFrame()
	if err != nil {
		t.Fatalf("frame 3: %v", err)
	}
	b.Release()
	if d := in.At().Sub(first); d < 15*time.Millisecond {
		t.Fatalf("the second read is stamped %v after the first, want about 20ms", d)
	}
}
