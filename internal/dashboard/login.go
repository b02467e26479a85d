package dashboard

import (
	"net/http"
	"strings"
)

type loginData struct {
	Next string
}

// safeNext keeps a post-login redirect inside the dashboard.
func safeNext(next string) string {
	if !strings.HasPrefix(next, Prefix) || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return Prefix
	}
	return next
}

func (d *Dashboard) loginForm(w http.ResponseWriter, r *http.Request) {
	d.render(w, r, http.StatusOK, "login", page{Title: "Log in", Content: loginData{Next: safeNext(r.URL.Query().Get("next"))}})
}

// login checks a pasted bearer or service-account token by asking the API who it is (a
// SelfSubjectReview through the chain, as that token) and opens a session. A token the API
// does not accept answers 401 with no detail.
func (d *Dashboard) login(w http.ResponseWriter, r *http.Request) {
	if !sameOrigin(r) {
		d.fail(w, r, nil, http.StatusForbidden, "Forbidden", "Cross-site request refused.")
		return
	}
	token := strings.TrimSpace(r.PostFormValue("token"))
	next := safeNext(r.PostFormValue("next"))
	if token == "" || strings.ContainsAny(token, " \t\r\n") {
		d.loginFailed(w, next)
		return
	}
	name, err := whoAmI(r.Context(), restConfig(d.o.API, credential{token: token, remote: r.RemoteAddr}))
	if err != nil {
		d.loginFailed(w, next)
		return
	}
	id := d.sessions.create(token, name)
	http.SetCookie(w, sessionCookie(id, int(d.o.SessionTTL.Seconds())))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

func (d *Dashboard) loginFailed(w http.ResponseWriter, next string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusUnauthorized)
	_ = d.pages["login"].ExecuteTemplate(w, "layout", page{Title: "Log in", Flash: "Login failed.", Content: loginData{Next: next}})
}

func (d *Dashboard) logout(w http.ResponseWriter, r *http.Request) {
	u := userFrom(r.Context())
	if !d.checkWrite(w, r, u) {
		return
	}
	if u.sessionID != "" {
		d.sessions.remove(u.sessionID)
	}
	http.SetCookie(w, sessionCookie("", -1))
	http.Redirect(w, r, Prefix+"login", http.StatusSeeOther)
}
