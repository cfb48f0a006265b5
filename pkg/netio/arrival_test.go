package netio

import (
	"io"
	"runtime"
	"testing"
	"time"
)

// Bytes that wait in the socket before they are read carry the time they
// arrived, not the time of the read: what lets a latency sample leave out
// a proxy that was too busy to read.
func TestArrivalStamps(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("arrival stamps need Linux")
	}
	client, server := tcpPair(t)
	rw := Wrap(client)
	if !ArrivalStamps(rw) {
		t.Fatal("ArrivalStamps: false on a TCP socket")
	}
	if _, ok := Arrived(rw); ok {
		t.Error("a stamp before anything was read")
	}
	buf := make([]byte, 64)
	// The kernel turns stamping on a moment after the first socket asks.
	for deadline := time.Now().Add(2 * time.Second); ; {
		if _, err := server.Write([]byte("warm")); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(rw, buf[:4]); err != nil {
			t.Fatal(err)
		}
		if _, ok := Arrived(rw); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no stamp on anything read within 2s")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := range 3 {
		sent := time.Now()
		if _, err := server.Write([]byte("answer")); err != nil {
			t.Fatal(err)
		}
		time.Sleep(30 * time.Millisecond) // the reader is busy
		n, err := rw.Read(buf)
		read := time.Now()
		if err != nil || string(buf[:n]) != "answer" {
			t.Fatalf("read %d: %q, %v", i, buf[:n], err)
		}
		at, ok := Arrived(rw)
		if !ok {
			t.Fatalf("read %d: no stamp", i)
		}
		// The wall clock of the stamp against the wall clock of the test,
		// with a millisecond of slack for the two clocks' reading.
		if at.Before(sent.Add(-time.Millisecond)) || read.Sub(at) < 25*time.Millisecond {
			t.Errorf("read %d: sent %s, stamped %s, read %s; want the stamp at the send, about 30ms before the read",
				i, sent.Format(time.StampMicro), at.Format(time.StampMicro), read.Format(time.StampMicro))
		}
	}
	// A plain Wrap keeps none.
	plain := Wrap(server)
	if _, err := client.Write([]byte("x")); err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Read(buf); err != nil {
		t.Fatal(err)
	}
	if _, ok := Arrived(plain); ok {
		t.Error("a stamp on a socket that did not ask for them")
	}
}

func BenchmarkReadStamped(b *testing.B) {
	for _, stamped := range []bool{false, true} {
		name := "read"
		if stamped {
			name = "recvmsg+stamp"
		}
		b.Run(name, func(b *testing.B) {
			client, server := tcpPair(b)
			rw := Wrap(client)
			if stamped && !ArrivalStamps(rw) {
				b.Skip("no stamps")
			}
			msg := make([]byte, 512)
			buf := make([]byte, 4096)
			b.ReportAllocs()
			for b.Loop() {
				if _, err := server.Write(msg); err != nil {
					b.Fatal(err)
				}
				for got := 0; got < len(msg); {
					n, err := rw.Read(buf)
					if err != nil {
						b.Fatal(err)
					}
					got += n
				}
			}
		})
	}
}
