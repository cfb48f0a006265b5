package frame

import (
	"io"
	"testing"
)

// benchFrameSize is the size of a typical small request or response.
const benchFrameSize = 100

// BenchmarkReadFrame reads 100-byte frames from an endless in-memory stream
// in each framing mode; steady state must not allocate.
func BenchmarkReadFrame(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			f := queryFrame(m.version, 1, benchFrameSize-HeaderLen)
			r := m.reader(&loopReader{data: m.encode(b, repeatFrame(f, 1000)...)}, 0)
			b.SetBytes(int64(len(f)))
			b.ReportAllocs()
			for b.Loop() {
				buf, err := r.ReadFrame()
				if err != nil {
					b.Fatal(err)
				}
				buf.Release()
			}
		})
	}
}

// BenchmarkReadFrameLarge reads 256 KiB frames, which span several segments
// in v5.
func BenchmarkReadFrameLarge(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			f := rawFrame(m.version, 1, 256<<10, true)
			r := m.reader(&loopReader{data: m.encode(b, repeatFrame(f, 4)...)}, 0)
			b.SetBytes(int64(len(f)))
			b.ReportAllocs()
			for b.Loop() {
				buf, err := r.ReadFrame()
				if err != nil {
					b.Fatal(err)
				}
				buf.Release()
			}
		})
	}
}

// BenchmarkWriteFrame writes 100-byte frames, flushing every 16 frames as a
// connection writer draining its queue would.
func BenchmarkWriteFrame(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			f := queryFrame(m.version, 1, benchFrameSize-HeaderLen)
			w := m.writer(io.Discard)
			b.SetBytes(int64(len(f)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				if err := w.WriteFrame(f); err != nil {
					b.Fatal(err)
				}
				if i++; i%16 == 0 {
					if err := w.Flush(); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkWriteFrameLarge writes and flushes 256 KiB frames.
func BenchmarkWriteFrameLarge(b *testing.B) {
	for _, m := range modes {
		b.Run(m.name, func(b *testing.B) {
			f := rawFrame(m.version, 1, 256<<10, true)
			w := m.writer(io.Discard)
			b.SetBytes(int64(len(f)))
			b.ReportAllocs()
			for b.Loop() {
				if err := w.WriteFrame(f); err != nil {
					b.Fatal(err)
				}
				if err := w.Flush(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
