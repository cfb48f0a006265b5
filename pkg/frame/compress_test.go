package frame

import "testing"

func TestParseCompression(t *testing.T) {
	tests := []struct {
		name    string
		want    Compression
		wantErr bool
	}{
		{"", CompressionNone, false},
		{"lz4", CompressionLZ4, false},
		{"LZ4", CompressionLZ4, false},
		{"snappy", CompressionSnappy, false},
		{"Snappy", CompressionSnappy, false},
		{"zstd", CompressionNone, true},
		{"lz4 ", CompressionNone, true},
	}
	for _, tt := range tests {
		got, err := ParseCompression(tt.name)
		if got != tt.want || (err != nil) != tt.wantErr {
			t.Errorf("ParseCompression(%q) = %v, %v; want %v, error %v", tt.name, got, err, tt.want, tt.wantErr)
		}
		if err == nil {
			if back, err := ParseCompression(got.String()); back != got || err != nil {
				t.Errorf("ParseCompression(%v.String()) = %v, %v; want %v", got, back, err, got)
			}
		}
	}
}
