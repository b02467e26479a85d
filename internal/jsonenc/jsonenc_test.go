package jsonenc

import (
	"bytes"
	"encoding/json"
	"math"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// appendJSON must write exactly what encoding/json writes (without HTML escaping).
func TestAppendJSONMatchesEncodingJSON(t *testing.T) {
	cases := []any{
		nil, true, false, "", "plain", "quote\" back\\slash", "ctl\x00\x01\x1f\n\r\t", "utf8 é 世界", "bad \xff utf8",
		"line\u2028sep\u2029", "<html>&amp;", int64(0), int64(-42), int64(math.MaxInt64), 1.5, -0.000001, 1e-7, 1e21, 123456789.0, 3.0,
		map[string]any{}, []any{}, map[string]any{"b": int64(1), "a": []any{"x", nil, map[string]any{"z": false}}},
	}
	for _, c := range cases {
		var want bytes.Buffer
		enc := json.NewEncoder(&want)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(c); err != nil {
			t.Fatal(err)
		}
		got, err := AppendValue(nil, c)
		if err != nil {
			t.Fatalf("%#v: %v", c, err)
		}
		if string(got) != string(bytes.TrimSuffix(want.Bytes(), []byte("\n"))) {
			t.Errorf("%#v: got %s, want %s", c, got, want.Bytes())
		}
	}
	if _, err := AppendValue(nil, math.NaN()); err == nil {
		t.Error("NaN encoded without an error")
	}
}

// FuzzAppendJSON: anything that decodes as JSON re-encodes to the same value.
func FuzzAppendJSON(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[true,null,"x"]}`, `"\u2028\ud800"`, `1e300`, `-0.0000001`, `{"":{"":[]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var v any
		if err := utiljson.Unmarshal(data, &v); err != nil {
			return
		}
		out, err := AppendValue(nil, v)
		if err != nil {
			t.Fatalf("encode %q: %v", data, err)
		}
		var back any
		if err := utiljson.Unmarshal(out, &back); err != nil {
			t.Fatalf("re-decode %q (from %q): %v", out, data, err)
		}
		again, _ := AppendValue(nil, back)
		if !bytes.Equal(out, again) {
			t.Fatalf("not stable: %q then %q", out, again)
		}
	})
}
