package server

import "testing"

func TestValidVolumeName(t *testing.T) {
	for name, ok := range map[string]bool{
		"pvc-0b6e4d2a-1c1f-4d59-9a77-3f0c2b7d1e21": true, "data": true,
		"": false, ".": false, "..": false, "../x": false, "a/b": false, "A": false, "x%2f..": false,
	} {
		if err := ValidVolumeName(name); (err == nil) != ok {
			t.Errorf("ValidVolumeName(%q) = %v, want ok %v", name, err, ok)
		}
	}
}
