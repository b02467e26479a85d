package dashboard

import (
	"fmt"
	"html/template"
	"strings"
)

// pageNames are the views; each templates/NAME.html defines "content", rendered inside
// templates/layout.html's "layout" (or alone for a live refresh).
var pageNames = []string{"login", "error", "health", "kind", "object"}

type errorData struct {
	Code           int
	Title, Message string
}

var funcs = template.FuncMap{
	"indent": func(n int) string { return strings.Repeat("  ", n) },
	"plural": func(n int, one, many string) string {
		if n == 1 {
			return one
		}
		return many
	},
	"num": func(n int) string {
		s := fmt.Sprint(n)
		for i := len(s) - 3; i > 0; i -= 3 {
			s = s[:i] + "," + s[i:]
		}
		return s
	},
	"nsPath": nsPath,
}

func parseTemplates() (map[string]*template.Template, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(files, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("dashboard templates: %w", err)
	}
	out := map[string]*template.Template{}
	for _, n := range pageNames {
		t, err := base.Clone()
		if err != nil {
			return nil, err
		}
		if out[n], err = t.ParseFS(files, "templates/"+n+".html"); err != nil {
			return nil, fmt.Errorf("dashboard template %s: %w", n, err)
		}
	}
	return out, nil
}
