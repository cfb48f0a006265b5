package backend

import "testing"

func TestParseStatusChange(t *testing.T) {
	body := []byte{0, 13}
	body = append(body, "STATUS_CHANGE"...)
	body = append(body, 0, 4, 'D', 'O', 'W', 'N', 4, 127, 0, 11, 2, 0, 0, 0x23, 0x52)
	change, addr, err := parseStatusChange(body)
	if err != nil || change != "DOWN" || addr != "127.0.11.2:9042" {
		t.Errorf("got %q %q %v; want DOWN 127.0.11.2:9042 <nil>", change, addr, err)
	}
	for i := 0; i < len(body); i++ {
		if _, _, err := parseStatusChange(body[:i]); err == nil {
			t.Errorf("truncated to %d bytes: no error", i)
		}
	}
}
