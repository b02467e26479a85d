package filters

import (
	"context"
	"slices"
	"strings"
	"testing"
)

func TestParseTokens(t *testing.T) {
	st, err := ParseTokens(strings.NewReader("# comment\ns3cret,alice,uid-1,\"dev,ops\"\nt2,bob,uid-2\n"), "tokens.csv")
	if err != nil {
		t.Fatal(err)
	}
	u, ok, err := st.AuthenticateToken(context.Background(), "s3cret")
	if err != nil || !ok || u.Name != "alice" || u.UID != "uid-1" || !slices.Equal(u.Groups, []string{"dev", "ops", "system:authenticated"}) {
		t.Fatalf("s3cret: %+v %v %v", u, ok, err)
	}
	if u, ok, _ := st.AuthenticateToken(context.Background(), "t2"); !ok || !slices.Equal(u.Groups, []string{"system:authenticated"}) {
		t.Fatalf("t2: %+v %v", u, ok)
	}
	if _, ok, _ := st.AuthenticateToken(context.Background(), "nope"); ok {
		t.Fatal("unknown token authenticated")
	}
	for _, bad := range []string{"tok,alice\n", ",alice,uid\n", "t,a,u\nt,b,u\n", "\"unterminated\n"} {
		if _, err := ParseTokens(strings.NewReader(bad), "bad.csv"); err == nil || !strings.Contains(err.Error(), "bad.csv") {
			t.Errorf("%q: err %v, want an error naming the file", bad, err)
		}
	}
}
